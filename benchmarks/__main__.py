"""``python -m benchmarks``: run every benchmark and print its table."""

from benchmarks import (
    bench_detection,
    bench_memory,
    bench_random_access,
    bench_read,
    bench_runners,
    bench_scale,
    bench_segmentation,
    bench_tabular,
    bench_wide,
    bench_write,
)

for module in (bench_write, bench_read, bench_random_access, bench_detection, bench_segmentation, bench_runners,
               bench_tabular, bench_wide, bench_scale, bench_memory):
    module.main([])
