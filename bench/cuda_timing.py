"""The median of CUDA-event timings of one callable, for the bench scripts that time a peer alone (Flex
masks, FA4's backward): `warmup` calls first (the first compiles), then `runs` timed one by one."""


def median_ms(torch, fn, runs=20, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1))
    times.sort()
    return times[len(times) // 2]
