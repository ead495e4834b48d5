// A minimal work-sharing loop: items handed out by an atomic counter to short-lived threads.
// Calls are coarse (a whole attention problem), so spawning per call costs little and keeps
// no global state.
#pragma once

#include <cstdint>
#include <functional>

namespace fastattn::util {

// Number of workers for a request (0 = all hardware threads), never more than `items`.
int worker_count(int requested, int64_t items);

// Runs fn(item, worker) for every item in [0, n), worker in [0, workers). The calling thread
// is worker 0. Items are taken in increasing order, so put the longest first.
void parallel_for(int64_t n, int workers, const std::function<void(int64_t item, int worker)>& fn);

}  // namespace fastattn::util
