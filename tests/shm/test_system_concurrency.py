"""Several threads and processes using system shared-memory regions at once."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from shm_helpers import DEV_SHM, ROOT, KeyFactory, new_key, region

from tritonhttp.utils import shared_memory as shm


def test_threads_with_their_own_regions() -> None:
    def worker(seed: int) -> bool:
        rng = np.random.default_rng(seed)
        for _ in range(40):
            value = rng.standard_normal(rng.integers(1, 500)).astype(np.float32)
            key = new_key()
            h = shm.create_shared_memory_region(f"t{seed}", key, value.nbytes + 8)
            try:
                shm.set_shared_memory_region(h, [value], offset=8)
                got = shm.get_contents_as_numpy(h, np.float32, value.shape, offset=8)
                if not np.array_equal(got, value):
                    return False
                del got
            finally:
                shm.destroy_shared_memory_region(h)
        return True

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(worker, range(16)))
    assert shm.mapped_shared_memory_regions() == []


def test_threads_sharing_one_region_write_disjoint_slices(key_factory: KeyFactory) -> None:
    n_threads, per = 8, 1024
    with region("shared", key_factory(), n_threads * per * 8) as h:

        def worker(index: int) -> bool:
            value = np.full(per, index, dtype=np.int64)
            for _ in range(30):
                shm.set_shared_memory_region(h, [value], offset=index * per * 8)
                got = shm.get_contents_as_numpy(h, np.int64, [per], offset=index * per * 8)
                if not (got == index).all():
                    return False
            return True

        with ThreadPoolExecutor(n_threads) as pool:
            assert all(pool.map(worker, range(n_threads)))
        whole = shm.get_contents_as_numpy(h, np.int64, [n_threads, per])
        assert (whole == np.arange(n_threads)[:, None]).all()
        del whole


def test_concurrent_attach_and_destroy_keep_the_count_right(key_factory: KeyFactory) -> None:
    key = key_factory()
    owner = shm.create_shared_memory_region("owner", key, 256)
    barrier = threading.Barrier(8)

    def worker(_: int) -> None:
        barrier.wait()
        for _ in range(50):
            h = shm.create_shared_memory_region("w", key, 256)
            shm.set_shared_memory_region(h, [np.ones(4)])
            shm.destroy_shared_memory_region(h)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(worker, range(8)))
    assert shm.mapped_shared_memory_regions() == [key]
    assert (DEV_SHM / key[1:]).exists()
    shm.destroy_shared_memory_region(owner)
    assert not (DEV_SHM / key[1:]).exists()
    assert shm.mapped_shared_memory_regions() == []


def _destroy_after(
    barrier: threading.Barrier, handle: shm.SharedMemoryRegion, outcomes: list[str]
) -> None:
    barrier.wait()
    try:
        shm.destroy_shared_memory_region(handle)
        outcomes.append("ok")
    except shm.SharedMemoryException:
        outcomes.append("refused")


def test_racing_destroys_of_one_handle_succeed_exactly_once(key_factory: KeyFactory) -> None:
    for _ in range(20):
        h = shm.create_shared_memory_region("r", key_factory(), 64)
        barrier = threading.Barrier(6)
        outcomes: list[str] = []
        threads = [
            threading.Thread(target=_destroy_after, args=(barrier, h, outcomes)) for _ in range(6)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(outcomes) == ["ok"] + ["refused"] * 5
    assert shm.mapped_shared_memory_regions() == []


def _read_until_destroyed(
    handle: shm.SharedMemoryRegion, stop: threading.Event, errors: list[BaseException]
) -> None:
    while not stop.is_set():
        try:
            total = float(shm.get_contents_as_numpy(handle, np.float64, [1 << 13]).sum())
            assert total == 1 << 13
            shm.set_shared_memory_region(handle, [np.ones(16)])
        except shm.SharedMemoryException:
            return  # destroyed: the expected way out
        except BaseException as e:
            errors.append(e)
            return


def test_reads_racing_a_destroy_never_crash(key_factory: KeyFactory) -> None:
    for _ in range(20):
        h = shm.create_shared_memory_region("r", key_factory(), 1 << 16)
        shm.set_shared_memory_region(h, [np.ones(1 << 13)])
        stop = threading.Event()
        errors: list[BaseException] = []
        threads = [
            threading.Thread(target=_read_until_destroyed, args=(h, stop, errors)) for _ in range(4)
        ]
        for t in threads:
            t.start()
        shm.destroy_shared_memory_region(h)
        stop.set()
        for t in threads:
            t.join()
        assert errors == []


def test_processes_write_their_slices_of_one_region(key_factory: KeyFactory) -> None:
    key, n, per = key_factory(), 4, 4096
    code = textwrap.dedent(
        """
        import sys
        import numpy as np
        from tritonhttp.utils import shared_memory as shm
        key, index, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
        h = shm.create_shared_memory_region(f"p{index}", key, 0)  # attach
        for _ in range(20):
            shm.set_shared_memory_region(h, [np.full(per, index, np.int32)], offset=index * per * 4)
        shm.destroy_shared_memory_region(h)
        print("ok")
        """
    )
    with region("parent", key, n * per * 4) as h:
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", code, key, str(i), str(per)],
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for i in range(n)
        ]
        for p in procs:
            out, err = p.communicate(timeout=60)
            assert p.returncode == 0 and out.strip() == "ok" and err == "", err
        whole = shm.get_contents_as_numpy(h, np.int32, [n, per])
        assert (whole == np.arange(n)[:, None]).all()
        del whole
