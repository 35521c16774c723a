// A stop asked for from outside a long run (rlgemm bench): SIGINT (Ctrl-C) or SIGTERM sets a flag that the run
// reads between problems, so that it ends after the current one and keeps what it measured. A second signal one
// second or more after the first ends the process at once (Ctrl-C pressed again). Signals that come together
// are one request: timeout(1) signals the process it runs and then its whole process group, so that process
// receives the signal twice within microseconds (a server-mode run stopped by timeout ended once without its
// summary or its JSON, as a process ended by the second signal does).
#pragma once

#include <atomic>
#include <cstdint>

namespace rlgemm {

class StopSignal {
 public:
  // Installs the handler for SIGINT and SIGTERM, with the flag cleared; one object at a time.
  StopSignal();
  // Puts back the default handling.
  ~StopSignal();
  StopSignal(const StopSignal&) = delete;
  StopSignal& operator=(const StopSignal&) = delete;

  // Set by the first signal.
  const std::atomic<bool>& requested() const;
};

// Whether a further signal at `now_ns` ends the process, the first having come at `first_ns` (monotonic clock).
bool second_signal_ends(int64_t first_ns, int64_t now_ns);

}  // namespace rlgemm
