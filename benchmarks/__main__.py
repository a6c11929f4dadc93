"""``python -m benchmarks``: run every benchmark and print its table."""

from benchmarks import bench_runners

for module in (bench_runners,):
    module.main([])
