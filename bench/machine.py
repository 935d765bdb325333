"""What the Python benchmarks say of the machine they ran on (bench/redis_bench.py,
bench/python_bench.py)."""

import platform


def cpu_model():
    """The CPU's model name from /proc/cpuinfo, else what platform knows."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"
