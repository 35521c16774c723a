#include "core/stop_signal.h"

#include <csignal>
#include <ctime>

#include "rlgemm/error.h"

namespace rlgemm {
namespace {

constexpr int64_t kTogetherNs = 1'000'000'000;  // signals closer than this to the first are the same request

std::atomic<bool> g_requested{false};
std::atomic<int64_t> g_first_ns{0};
std::atomic<bool> g_installed{false};

int64_t monotonic_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);  // async-signal-safe
  return int64_t(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

// The first signal's time is claimed before the flag is set, so that a second signal handled at once on another
// thread reads it, never a zero.
extern "C" void on_stop_signal(int signal) {
  const int64_t now = monotonic_ns();
  int64_t first = 0;
  const bool is_first = g_first_ns.compare_exchange_strong(first, now);
  g_requested = true;
  if (is_first) return;
  if (second_signal_ends(first, now)) {
    std::signal(signal, SIG_DFL);
    std::raise(signal);
  }
}

}  // namespace

bool second_signal_ends(int64_t first_ns, int64_t now_ns) { return now_ns - first_ns >= kTogetherNs; }

StopSignal::StopSignal() {
  if (g_installed.exchange(true)) throw Error(ErrorKind::kInvalidInput, "StopSignal: one is installed already");
  g_requested = false;
  g_first_ns = 0;
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
}

StopSignal::~StopSignal() {
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  g_installed = false;
}

const std::atomic<bool>& StopSignal::requested() const { return g_requested; }

}  // namespace rlgemm
