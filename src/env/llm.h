// `rlgemm propose --llm`: asks an OpenAI-compatible chat endpoint (POST /v1/chat/completions) for kernels
// of a shape -- designs in rlgemm's grammar or source under the kernel contract -- and reads the submission
// out of each answer.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlgemm/problem.h"
#include "store/store.h"

namespace rlgemm::env {

struct ChatOptions {
  std::string url;      // the endpoint's base ("http://host:port" or ".../v1"), or the full .../chat/completions
  std::string model;
  std::string api_key;  // sent as a bearer token when not empty
  double timeout_s = 300;
  double temperature = 0.8;
};

// One chat completion; returns the first choice's message content. Throws Error(kRuntime) naming the
// endpoint for a transport failure, an HTTP error or an answer without a message.
std::string chat_completion(const ChatOptions& options, const std::string& system, const std::string& user);

// The system prompt: the contract, the design grammar.
std::string propose_system_prompt();
// The user prompt: the shape, the GPU and the best measured designs (fastest first).
std::string propose_user_prompt(const Problem& problem, const std::string& gpu, const std::vector<BestDesign>& best);

// The submission in an answer, as a request body without its shape: {"source": ...} for a fenced block that
// defines rlgemm_launch, {"design": ...} for the first line (fenced or not) that parses as a design; nullopt
// when there is neither.
std::optional<nlohmann::json> submission_from_answer(const std::string& answer);

}  // namespace rlgemm::env
