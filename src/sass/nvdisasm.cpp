#include "sass/nvdisasm.h"

#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <regex>
#include <sstream>
#include <unistd.h>

#include "rlgemm/error.h"

namespace rlgemm::sass {
namespace {

namespace fs = std::filesystem;

// Runs a shell command and returns (exit status, stdout).
std::pair<int, std::string> run_capture(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return {-1, out};
  std::array<char, 65536> buffer;
  size_t got;
  while ((got = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) out.append(buffer.data(), got);
  const int status = ::pclose(pipe);
  return {status, out};
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

bool executable(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
}

std::vector<fs::path> python_package_candidates() {
  std::vector<fs::path> out;
  const auto [status, text] = run_capture(
      "python3 -c \"import site,sysconfig;"
      "print('\\n'.join([sysconfig.get_paths()['purelib'],sysconfig.get_paths()['platlib']]+"
      "[site.getusersitepackages()]+list(getattr(site,'getsitepackages',lambda:[])())))\" 2>/dev/null");
  if (status != 0) return out;
  std::istringstream lines(text);
  std::string dir;
  while (std::getline(lines, dir))
    for (const char* sub : {"nvidia/cu13/bin/nvdisasm", "nvidia/cuda_nvdisasm/bin/nvdisasm", "nvidia/cu12/bin/nvdisasm"})
      if (!dir.empty()) out.push_back(fs::path(dir) / sub);
  return out;
}

struct Lookup {
  bool found = false;
  NvdisasmTool tool;
  std::string why;
};

Lookup locate() {
  std::vector<std::pair<fs::path, std::string>> candidates;
  if (const char* env = std::getenv("RLGEMM_NVDISASM"); env && *env) {
    if (!executable(env)) return {false, {}, std::string("$RLGEMM_NVDISASM names '") + env + "', which is not an executable file"};
    candidates.emplace_back(env, "$RLGEMM_NVDISASM");
  }
  if (const char* path = std::getenv("PATH")) {
    std::istringstream dirs(path);
    std::string dir;
    while (std::getline(dirs, dir, ':'))
      if (!dir.empty()) candidates.emplace_back(fs::path(dir) / "nvdisasm", "PATH");
  }
  candidates.emplace_back("/usr/local/cuda/bin/nvdisasm", "the CUDA toolkit");
  for (auto& p : python_package_candidates()) candidates.emplace_back(p, "the nvidia-cuda-nvdisasm Python package");
  std::string too_old;
  for (const auto& [path, where] : candidates) {
    if (!executable(path)) continue;
    const auto [status, text] = run_capture(shell_quote(path.string()) + " --version 2>&1");
    std::smatch m;
    static const std::regex release(R"(release (\d+)\.(\d+))");
    if (status != 0 || !std::regex_search(text, m, release)) {
      too_old += " " + path.string() + " (no version)";
      continue;
    }
    NvdisasmTool tool{path.string(), std::stoi(m[1]), std::stoi(m[2])};
    if (tool.major < kMinNvdisasmMajor || (tool.major == kMinNvdisasmMajor && tool.minor < kMinNvdisasmMinor)) {
      too_old += " " + path.string() + " (release " + std::to_string(tool.major) + "." + std::to_string(tool.minor) + ")";
      continue;
    }
    return {true, tool, ""};
  }
  std::string why = "nvdisasm " + std::to_string(kMinNvdisasmMajor) + "." + std::to_string(kMinNvdisasmMinor) +
                    " or newer is needed to read sm_90a code and none was found in $RLGEMM_NVDISASM, PATH, "
                    "/usr/local/cuda/bin or the nvidia-cuda-nvdisasm Python package";
  if (!too_old.empty()) why += "; too old or unusable:" + too_old;
  why += ". Install it with: python3 -m pip install -r scripts/requirements.txt";
  return {false, {}, why};
}

const Lookup& cached_lookup() {
  static Lookup lookup = locate();
  return lookup;
}

}  // namespace

NvdisasmTool find_nvdisasm() {
  const auto& l = cached_lookup();
  if (!l.found) throw Error(ErrorKind::kRuntime, l.why);
  return l.tool;
}

bool nvdisasm_available(std::string* why) {
  const auto& l = cached_lookup();
  if (!l.found && why) *why = l.why;
  return l.found;
}

std::string DisasmInstruction::text() const {
  std::string t = predicate.empty() ? "" : predicate + " ";
  t += opcode;
  if (!operands.empty()) t += " " + operands;
  return t;
}

std::vector<DisasmFunction> parse_nvdisasm_json(const std::string& json_text) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(json_text);
  } catch (const std::exception& e) {
    throw Error(ErrorKind::kRuntime, std::string("nvdisasm printed JSON rlgemm cannot parse: ") + e.what());
  }
  if (!doc.is_array() || doc.size() < 2 || !doc[1].is_array())
    throw Error(ErrorKind::kRuntime, "nvdisasm's JSON is not [header, [functions...]]: an unsupported nvdisasm version");
  std::vector<DisasmFunction> functions;
  for (const auto& f : doc[1]) {
    DisasmFunction fn;
    fn.name = f.at("function-name").get<std::string>();
    fn.start = f.value("start", uint64_t(0));
    fn.length = f.value("length", uint64_t(0));
    for (const auto& ins : f.at("sass-instructions")) {
      DisasmInstruction d;
      d.predicate = ins.value("predicate", std::string());
      d.opcode = ins.value("opcode", std::string());
      d.operands = ins.value("operands", std::string());
      if (ins.contains("other-attributes") && ins["other-attributes"].is_object()) {
        const auto& a = ins["other-attributes"];
        d.control_flow = a.value("control-flow", std::string()) == "True";
        d.inter_warp_barrier = a.value("inter-warp-barrier", std::string()) == "True";
      }
      fn.instructions.push_back(std::move(d));
    }
    functions.push_back(std::move(fn));
  }
  return functions;
}

std::vector<DisasmFunction> disassemble(const std::vector<uint8_t>& cubin) {
  const NvdisasmTool tool = find_nvdisasm();
  char name[] = "/tmp/rlgemm-sass-XXXXXX";
  const int fd = ::mkstemp(name);
  if (fd < 0) throw Error(ErrorKind::kRuntime, "cannot create a temporary file for nvdisasm");
  ::close(fd);
  {
    std::ofstream out(name, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(cubin.data()), std::streamsize(cubin.size()));
  }
  const std::string err = std::string(name) + ".err";
  const auto [status, text] = run_capture(shell_quote(tool.path) + " -json " + shell_quote(name) + " 2>" + shell_quote(err));
  std::string message;
  {
    std::ifstream in(err);
    std::getline(in, message, '\0');
  }
  std::remove(name);
  std::remove(err.c_str());
  if (status != 0)
    throw Error(ErrorKind::kRuntime, "nvdisasm could not disassemble the cubin: " + (message.empty() ? std::string("exit status ") + std::to_string(status) : message));
  return parse_nvdisasm_json(text);
}

DisasmFunction disassemble_kernel(const std::vector<uint8_t>& cubin, const std::string& kernel) {
  for (auto& f : disassemble(cubin))
    if (f.name == kernel) return f;
  throw Error(ErrorKind::kInvalidInput, "nvdisasm lists no function named '" + kernel + "'");
}

}  // namespace rlgemm::sass
