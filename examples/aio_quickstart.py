"""Quickstart for asyncio: concurrent inferences and a streamed generation with tritonhttp.aio.

Usage: python examples/aio_quickstart.py [HOST:PORT]   (default localhost:8000)

The server must serve ``add_sub`` (two FP32 [4] inputs INPUT0/INPUT1, outputs
OUTPUT0 = INPUT0 + INPUT1 and OUTPUT1 = INPUT0 - INPUT1, as in tests/models). If it also
serves a decoupled ``text_stream`` model (tests/repos/cli_generate), its answer is
streamed word by word.
"""

from __future__ import annotations

import asyncio
import sys

import numpy as np

import tritonhttp.aio as aioclient


async def add(client: aioclient.InferenceServerClient, offset: float) -> np.ndarray:
    a = np.arange(4, dtype=np.float32) + offset
    b = np.ones(4, dtype=np.float32)
    inputs = [
        aioclient.InferInput("INPUT0", [4], "FP32").set_data_from_numpy(a),
        aioclient.InferInput("INPUT1", [4], "FP32").set_data_from_numpy(b),
    ]
    result = await client.infer("add_sub", inputs)
    return result.as_numpy("OUTPUT0")


async def main(url: str = "localhost:8000") -> int:
    # Created outside any running loop is fine too; a read timeout keeps a stalled
    # server from hanging us, while a long inference may still take its time.
    async with aioclient.InferenceServerClient(url, read_timeout=30) as client:
        if not await client.is_server_live(client_timeout=5):
            print(f"no Triton server answers at {url}", file=sys.stderr)
            return 1

        # 16 inferences at once on up to 16 connections
        sums = await asyncio.gather(*(add(client, i) for i in range(16)))
        print("first sum:", sums[0], "last sum:", sums[-1])

        if await client.is_model_ready("text_stream"):
            print("streamed:", end=" ", flush=True)
            async with client.generate_stream(
                "text_stream", {"text_input": "tokens arrive one by one"}
            ) as events:
                async for event in events:
                    print(event["text_output"], end="", flush=True)
            print()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(*sys.argv[1:2])))
