"""Jupyter's execute round trip, the peer for Vis's block round trip.

Starts an ipykernel with jupyter_client, runs a trivial cell N times (waiting for the reply
and the kernel going idle, as a client that wants the output must), prints JSON with
microsecond percentiles.
"""
import json
import statistics
import sys
import time

from jupyter_client.manager import start_new_kernel


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    km, kc = start_new_kernel(kernel_name="python3")
    try:
        for _ in range(50):  # warm-up
            kc.execute_interactive("x = 1", store_history=False, timeout=30)
        samples = []
        for _ in range(n):
            t0 = time.perf_counter_ns()
            kc.execute_interactive("x = 1", store_history=False, timeout=30)
            samples.append((time.perf_counter_ns() - t0) / 1000)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    samples.sort()
    print(json.dumps({
        "n": n,
        "p50_us": samples[len(samples) // 2],
        "p99_us": samples[int(len(samples) * 0.99)],
        "mean_us": statistics.fmean(samples),
    }))


if __name__ == "__main__":
    main()
