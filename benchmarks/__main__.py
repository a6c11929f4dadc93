"""``python -m benchmarks``: run every benchmark and print its table."""

from benchmarks import (
    bench_append,
    bench_audio,
    bench_cache,
    bench_detection,
    bench_embedded,
    bench_fleet,
    bench_instance_masks,
    bench_memory,
    bench_names,
    bench_random_access,
    bench_read,
    bench_runners,
    bench_scale,
    bench_segmentation,
    bench_tabular,
    bench_tensors,
    bench_wide,
    bench_write,
    bench_yolo,
)

if __name__ == "__main__":  # not again in a worker process started by spawning (Dask's, in bench_runners)
    for module in (bench_write, bench_read, bench_random_access, bench_detection, bench_yolo, bench_instance_masks,
                   bench_segmentation, bench_runners, bench_tabular, bench_wide, bench_scale, bench_memory,
                   bench_embedded, bench_names, bench_tensors, bench_audio, bench_fleet, bench_cache,
                   bench_append):
        module.main([])
