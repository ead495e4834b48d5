#include "util/parallel_for.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace fastattn::util {

int worker_count(int requested, int64_t items) {
  // hardware_concurrency() asks the kernel (sched_getaffinity) on every call: once is enough.
  static const int hardware = int(std::thread::hardware_concurrency());
  int n = requested > 0 ? requested : hardware;
  n = std::max(n, 1);
  return int(std::max<int64_t>(1, std::min<int64_t>(n, items)));
}

void parallel_for(int64_t n, int workers, const std::function<void(int64_t, int)>& fn) {
  std::atomic<int64_t> next{0};
  auto run = [&](int worker) {
    for (int64_t item = next.fetch_add(1); item < n; item = next.fetch_add(1)) fn(item, worker);
  };
  std::vector<std::thread> pool;
  pool.reserve(size_t(std::max(workers - 1, 0)));
  for (int w = 1; w < workers; ++w) pool.emplace_back(run, w);
  run(0);
  for (std::thread& t : pool) t.join();
}

}  // namespace fastattn::util
