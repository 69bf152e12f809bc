"""64 MB FP32 identity round trip: system shared memory vs binary HTTP, both servers.

    python benchmarks/shm_bench.py [--mib 64] [--rounds 3] [--n 5] [--skip-real]

Model ``identity_all`` (``tests/models``), input ``IN_FP32``, output ``OUT_FP32``. One
client (``tritonhttp``, the sync client) talks to our bundled server and to real Triton
2.51.0 started side by side on the same repository; rounds alternate between the
servers and the median of the per-round means is kept. Scenarios, per request:

* ``binary``: ``set_data_from_numpy`` + ``infer`` (binary output) + ``as_numpy``;
* ``shm``: ``set_shared_memory_region`` (input into its region) + ``infer`` (input and
  output named by region) + ``get_contents_as_numpy`` (a view of the output region);
* ``shm infer``: ``infer`` alone, the input already in its region.

Prints a table (ms per round trip, GB/s of payload each way) and the ratios the issue's
targets are about: binary/shm on our server (target >= 5) and real/ours for shm
(target >= 1).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import tritonhttp as httpclient  # noqa: E402
from tritonhttp.utils import shared_memory as shm  # noqa: E402

MODELS = ROOT / "tests" / "models"


@contextlib.contextmanager
def servers(skip_real: bool) -> Iterator[dict[str, str]]:
    from tritonhttp.server import _launch

    ours = _launch.start(MODELS)
    real = None
    try:
        urls = {"bundled": ours.url}
        if not skip_real:
            from tritonhttp.testing import _real_triton as rt

            real = rt.start(MODELS)
            urls["real Triton"] = real.url
        yield urls
    finally:
        ours.stop()
        if real is not None:
            real.stop()


class Scenario:
    """The three round trips against one server, sharing two regions."""

    def __init__(self, url: str, value: np.ndarray, tag: str) -> None:
        self.client = httpclient.InferenceServerClient(url, network_timeout=600.0)
        self.value = value
        size = value.nbytes
        pid = os.getpid()
        self.in_name, self.out_name = f"bench_in_{tag}", f"bench_out_{tag}"
        self.h_in = shm.create_shared_memory_region(self.in_name, f"/bench_in_{pid}_{tag}", size)
        self.h_out = shm.create_shared_memory_region(self.out_name, f"/bench_out_{pid}_{tag}", size)
        self.client.register_system_shared_memory(self.in_name, self.h_in.shm_key, size)
        self.client.register_system_shared_memory(self.out_name, self.h_out.shm_key, size)
        self.shm_input = httpclient.InferInput("IN_FP32", list(value.shape), "FP32")
        self.shm_input.set_shared_memory(self.in_name, size)
        self.shm_output = httpclient.InferRequestedOutput("OUT_FP32")
        self.shm_output.set_shared_memory(self.out_name, size)
        shm.set_shared_memory_region(self.h_in, [value])

    def binary(self) -> None:
        inp = httpclient.InferInput("IN_FP32", list(self.value.shape), "FP32")
        inp.set_data_from_numpy(self.value)
        out = httpclient.InferRequestedOutput("OUT_FP32", binary_data=True)
        result = self.client.infer("identity_all", [inp], outputs=[out])
        got = result.as_numpy("OUT_FP32")
        assert got is not None and got.shape == self.value.shape

    def shm_infer(self) -> None:
        self.client.infer("identity_all", [self.shm_input], outputs=[self.shm_output])

    def shm_round_trip(self) -> None:
        shm.set_shared_memory_region(self.h_in, [self.value])
        self.shm_infer()
        got = shm.get_contents_as_numpy(self.h_out, np.float32, list(self.value.shape))
        assert got.shape == self.value.shape

    def check(self) -> None:
        """Both paths really carry the data."""
        self.binary()
        self.shm_round_trip()
        got = shm.get_contents_as_numpy(self.h_out, np.float32, list(self.value.shape))
        assert np.array_equal(got, self.value)
        del got

    def close(self) -> None:
        self.client.unregister_system_shared_memory(self.in_name)
        self.client.unregister_system_shared_memory(self.out_name)
        self.client.close()
        shm.destroy_shared_memory_region(self.h_in)
        shm.destroy_shared_memory_region(self.h_out)


def mean_seconds(fn: Callable[[], None], n: int) -> float:
    fn()  # warm: first-touch page faults, connection
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--n", type=int, default=5, help="requests per round and scenario")
    parser.add_argument("--skip-real", action="store_true")
    args = parser.parse_args()
    value = np.random.default_rng(0).standard_normal(args.mib * (1 << 20) // 4, dtype=np.float32)
    kinds = ("binary", "shm", "shm infer")
    times: dict[tuple[str, str], list[float]] = {}
    with servers(args.skip_real) as urls:
        scenarios = {
            name: Scenario(url, value, str(i)) for i, (name, url) in enumerate(urls.items())
        }
        try:
            for s in scenarios.values():
                s.check()
            for _ in range(args.rounds):
                for name, s in scenarios.items():
                    for kind, fn in zip(
                        kinds, (s.binary, s.shm_round_trip, s.shm_infer), strict=True
                    ):
                        times.setdefault((name, kind), []).append(mean_seconds(fn, args.n))
        finally:
            for s in scenarios.values():
                s.close()
    median = {k: statistics.median(v) for k, v in times.items()}
    gb = value.nbytes / 1e9
    print(f"{args.mib} MiB FP32 identity round trip ({args.rounds} rounds x {args.n}, median)")
    print(f"{'server':<12} {'path':<10} {'ms':>9} {'GB/s':>7}")
    for (name, kind), t in median.items():
        print(f"{name:<12} {kind:<10} {t * 1e3:9.2f} {gb / t:7.2f}")
    ours = "bundled"
    print(f"bundled: binary / shm round trip  = {median[ours, 'binary'] / median[ours, 'shm']:.1f}x"
          " (target >= 5)")  # fmt: skip
    print(f"bundled: binary / shm infer alone = "
          f"{median[ours, 'binary'] / median[ours, 'shm infer']:.1f}x")  # fmt: skip
    if "real Triton" in urls:
        real = "real Triton"
        for kind in kinds:
            ratio = median[real, kind] / median[ours, kind]
            note = " (target >= 1)" if kind == "shm" else ""
            print(f"real Triton / bundled, {kind:<9} = {ratio:.2f}x{note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
