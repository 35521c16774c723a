#include "env/llm.h"

#include <httplib.h>

#include <regex>
#include <sstream>

#include "env/contract.h"
#include "rlgemm/design.h"
#include "rlgemm/error.h"

namespace rlgemm::env {

using nlohmann::json;

namespace {

// Splits "http://host:port/prefix" into the scheme-host-port part and the path of the chat completions.
std::pair<std::string, std::string> endpoint(const std::string& url) {
  static const std::regex form(R"(^(https?://[^/]+)(/.*)?$)");
  std::smatch m;
  if (!std::regex_match(url, m, form)) fail("--llm must be an http:// or https:// URL, not '" + url + "'");
  std::string path = m[2].matched ? m[2].str() : "";
  while (!path.empty() && path.back() == '/') path.pop_back();
  if (path.size() >= 17 && path.compare(path.size() - 17, 17, "/chat/completions") == 0) return {m[1], path};
  if (path.size() >= 3 && path.compare(path.size() - 3, 3, "/v1") == 0) return {m[1], path + "/chat/completions"};
  return {m[1], path + "/v1/chat/completions"};
}

}  // namespace

std::string chat_completion(const ChatOptions& options, const std::string& system, const std::string& user) {
  const auto [host, path] = endpoint(options.url);
  httplib::Client client(host);
  const auto seconds = std::chrono::duration<double>(options.timeout_s);
  client.set_connection_timeout(std::chrono::duration_cast<std::chrono::microseconds>(seconds));
  client.set_read_timeout(std::chrono::duration_cast<std::chrono::microseconds>(seconds));
  httplib::Headers headers;
  if (!options.api_key.empty()) headers.emplace("Authorization", "Bearer " + options.api_key);
  const json body = {{"model", options.model},
                     {"temperature", options.temperature},
                     {"messages", {{{"role", "system"}, {"content", system}}, {{"role", "user"}, {"content", user}}}}};
  auto result = client.Post(path, headers, body.dump(), "application/json");
  const std::string where = host + path;
  if (!result) throw Error(ErrorKind::kRuntime, "chat endpoint " + where + ": " + httplib::to_string(result.error()));
  if (result->status != 200)
    throw Error(ErrorKind::kRuntime, "chat endpoint " + where + " answered HTTP " + std::to_string(result->status) +
                                         ": " + result->body.substr(0, 500));
  try {
    const json answer = json::parse(result->body);
    return answer.at("choices").at(0).at("message").at("content").get<std::string>();
  } catch (const json::exception& e) {
    throw Error(ErrorKind::kRuntime, "chat endpoint " + where + " gave no choices[0].message.content: " + e.what());
  }
}

std::string propose_system_prompt() {
  return "You write fp16 GEMM kernels (C = A * B, fp32 accumulation, fp16 output) for NVIDIA GPUs. Answer with "
         "exactly one of:\n"
         "1. a design in rlgemm's grammar on a line of its own, for example\n"
         "   sm80/128x128x32/w64x64/s4/swz/raster_m.g8/splitk1/epi_reg\n"
         "   sm90.ws.coop/128x256x64/s4/c1x1/raster_m.g8/splitk1/epi_reg\n"
         "2. CUDA C++ source in one ```cuda fenced block, defining extern \"C\" __global__ kernels and\n"
         "   extern \"C\" int rlgemm_launch(const rlgemm_problem* problem, const void* a, const void* b, void* c,\n"
         "                                void* workspace, size_t workspace_bytes, cudaStream_t stream);\n"
         "   (rlgemm_problem {int64_t m, n, k; int32_t layout;} is declared for you; layout 0 = tn: B stored N x K "
         "row-major, 1 = nn; A is M x K and C is M x N, row-major). All work goes on `stream`; no allocation, no "
         "synchronization, no cuBLAS; a workspace is asked for with extern \"C\" size_t "
         "rlgemm_workspace_bytes(const rlgemm_problem*).\n"
         "Kernels are checked against an fp64 reference on fresh inputs and timed beside cuBLAS.";
}

std::string propose_user_prompt(const Problem& problem, const std::string& gpu, const std::vector<BestDesign>& best) {
  std::ostringstream out;
  out << "Shape M,N,K = " << problem.shape.m << "," << problem.shape.n << "," << problem.shape.k << ", layout "
      << to_string(problem.layout) << ", on " << gpu << ".\n";
  if (best.empty()) {
    out << "No design has been measured on this GPU yet.\n";
  } else {
    out << "The best designs measured on this GPU (shape: design, time, speedup over cuBLASLt):\n";
    for (const auto& b : best) {
      out << "  " << b.problem.shape.to_string() << " " << to_string(b.problem.layout) << ": " << b.design << ", "
          << b.median_us << " us";
      if (b.speedup) out << ", " << *b.speedup << "x";
      out << "\n";
    }
  }
  out << "Propose a faster kernel for this shape.";
  return out.str();
}

std::optional<json> submission_from_answer(const std::string& answer) {
  static const std::regex fence(R"(```[A-Za-z+]*[ \t]*\n([\s\S]*?)```)");
  std::vector<std::string> blocks;
  for (std::sregex_iterator it(answer.begin(), answer.end(), fence), end; it != end; ++it) blocks.push_back((*it)[1]);
  for (const auto& block : blocks)
    if (block.find(kLaunchSymbol) != std::string::npos) return json{{"source", block}};
  // A design anywhere in the text (on a line of its own, in backticks, inside a sentence): the first that parses.
  static const std::regex design(R"((?:^|[\s`*(])(sm[0-9]+[a-z.]*/[^\s`*,;)]*[^\s`*,;).]))");
  for (std::sregex_iterator it(answer.begin(), answer.end(), design), end; it != end; ++it) {
    try {
      return json{{"design", to_string(parse_design((*it)[1].str()))}};
    } catch (const Error&) {
    }
  }
  return std::nullopt;
}

}  // namespace rlgemm::env
