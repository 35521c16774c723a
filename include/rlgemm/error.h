// rlgemm's one exception type: every failure a user can cause or meet carries a message that names the rule
// that was broken and what to do about it.
#pragma once

#include <stdexcept>
#include <string>

namespace rlgemm {

enum class ErrorKind {
  kInvalidInput,   // bad shape, file, flag: the user's input breaks a rule (exit code 2)
  kNoDevice,       // no CUDA device, or a driver too old for the runtime (exit code 3)
  kOutOfMemory,    // the device has too little free memory for the request (exit code 4)
  kRuntime,        // a CUDA, cuBLAS, compiler or I/O failure (exit code 1)
  kHang,           // GPU work did not finish within the watchdog's limit; the process must end (exit code 5)
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

[[noreturn]] inline void fail(const std::string& message) { throw Error(ErrorKind::kInvalidInput, message); }

// Process exit code for an error kind; the CLI and the tests agree on these.
inline int exit_code(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidInput: return 2;
    case ErrorKind::kNoDevice: return 3;
    case ErrorKind::kOutOfMemory: return 4;
    case ErrorKind::kRuntime: return 1;
    case ErrorKind::kHang: return 5;
  }
  return 1;
}

}  // namespace rlgemm
