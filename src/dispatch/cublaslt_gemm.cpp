#include "dispatch/cublaslt_gemm.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "bench/fill.h"
#include "core/cuda_util.h"
#include "rlgemm/error.h"

namespace rlgemm::dispatch {

CublasLtContext::CublasLtContext() { bench::check_cublas_status(cublasLtCreate(&handle_), "cublasLtCreate"); }
CublasLtContext::~CublasLtContext() { cublasLtDestroy(handle_); }

CublasLtGemm::CublasLtGemm(const CublasLtContext& context, const Problem& problem, std::optional<int> candidate)
    : context_(context), problem_(problem) {
  const std::vector<cublasLtMatmulHeuristicResult_t> results = problem_.candidates(context_.handle());
  const int found = int(results.size());
  int index = candidate.value_or(0);
  if (index < 0 || index >= found) {
    // A table recorded with another cuBLASLt: its index means nothing here.
    note_ = "candidate " + std::to_string(index) + " not offered (" + std::to_string(found) + " are): the first";
    index = 0;
  }
  if (results[size_t(index)].state != CUBLAS_STATUS_SUCCESS)
    throw Error(ErrorKind::kRuntime, "cuBLASLt candidate " + std::to_string(index) + " for " +
                                         problem.shape.to_string() + " " + std::string(to_string(problem.layout)) +
                                         " " + std::string(to_string(problem.dtype)) +
                                         " is not usable: " + cublasLtGetStatusString(results[size_t(index)].state));
  algo_ = results[size_t(index)].algo;
  workspace_bytes_ = results[size_t(index)].workspaceSize;
}

CublasLtGemm::CublasLtGemm(const CublasLtContext& context, const Problem& problem, bench::LtEpilogue epilogue)
    : context_(context), problem_(problem, epilogue) {}

std::unique_ptr<CublasLtGemm> CublasLtGemm::with_bias() const {
  std::unique_ptr<CublasLtGemm> plan(new CublasLtGemm(context_, problem_.problem(), bench::LtEpilogue::kBias));
  const std::optional<size_t> same = plan->problem_.check(context_.handle(), algo_);
  if (same && *same <= workspace_bytes_) {
    plan->algo_ = algo_;
    plan->workspace_bytes_ = *same;
    plan->note_ = note_;
    return plan;
  }
  plan = bias_first(context_, problem_.problem(), workspace_bytes_);
  plan->note_ = "with the bias epilogue, the heuristic's first: the algorithm chosen without it does not run it";
  return plan;
}

bool CublasLtGemm::same_algorithm(const CublasLtGemm& other) const {
  return bench::same_algo(algo_, other.algo_);
}

std::vector<cublasLtMatmulHeuristicResult_t> CublasLtGemm::bias_candidates() const {
  const bench::LtProblem lt(problem_.problem(), bench::LtEpilogue::kBias);
  const std::vector<cublasLtMatmulHeuristicResult_t> heuristic = lt.candidates(context_.handle(), workspace_bytes_);
  std::vector<cublasLtMatmulHeuristicResult_t> out;
  const auto first = std::find_if(heuristic.begin(), heuristic.end(),
                                  [](const auto& r) { return r.state == CUBLAS_STATUS_SUCCESS; });
  if (first != heuristic.end()) out.push_back(*first);
  if (const std::optional<size_t> same = lt.check(context_.handle(), algo_);
      same && *same <= workspace_bytes_ && !bench::offers(out, algo_)) {
    cublasLtMatmulHeuristicResult_t own{};
    own.algo = algo_;
    own.workspaceSize = *same;
    own.state = CUBLAS_STATUS_SUCCESS;
    out.push_back(own);
  }
  for (const cublasLtMatmulHeuristicResult_t& r : heuristic) {
    if (r.state == CUBLAS_STATUS_SUCCESS && !bench::offers(out, r.algo)) out.push_back(r);
  }
  return out;
}

std::unique_ptr<CublasLtGemm> CublasLtGemm::with_bias(int candidate) const {
  const std::vector<cublasLtMatmulHeuristicResult_t> results = bias_candidates();
  if (candidate < 0 || size_t(candidate) >= results.size()) {
    std::unique_ptr<CublasLtGemm> plan = with_bias();
    plan->note_ = "bias candidate " + std::to_string(candidate) + " not offered (" + std::to_string(results.size()) +
                  " are): the algorithm without the bias, with it";
    return plan;
  }
  std::unique_ptr<CublasLtGemm> plan(new CublasLtGemm(context_, problem_.problem(), bench::LtEpilogue::kBias));
  plan->algo_ = results[size_t(candidate)].algo;
  plan->workspace_bytes_ = results[size_t(candidate)].workspaceSize;
  return plan;
}

bench::LtChoice CublasLtGemm::time_bias_candidates(cudaStream_t stream, bench::Mode mode,
                                                   const std::optional<bench::LtOperands>& caller) const {
  const std::vector<cublasLtMatmulHeuristicResult_t> candidates = bias_candidates();
  if (candidates.empty())
    throw Error(ErrorKind::kRuntime, "cuBLASLt offers no algorithm with a bias epilogue for " +
                                         problem_.problem().shape.to_string() + " within " +
                                         std::to_string(workspace_bytes_) + " bytes of workspace");
  const Problem& p = problem_.problem();
  const bench::LtProblem lt(p, bench::LtEpilogue::kBias);
  const ChoiceSets x(p, stream, caller);
  DeviceScratch<unsigned char> bias(size_t(p.shape.n) * 2);
  bench::fill_random(reinterpret_cast<half*>(bias.ptr), size_t(p.shape.n), bench::Fill::kNormal, 5, stream, p.dtype);
  DeviceScratch<unsigned char> workspace(std::max<size_t>(workspace_bytes_, 16));
  const bench::LtChoice choice =
      bench::choose_fastest(lt, context_.handle(), candidates, x.sets(), workspace.ptr,
                            workspace_bytes_, stream, mode, bias.ptr, bench::LtWorkspace::kOwn,
                            bench::LtScoring::kSlowMode);
  RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));  // the scratch is freed on return
  return choice;
}

std::unique_ptr<CublasLtGemm> CublasLtGemm::bias_first(const CublasLtContext& context, const Problem& problem,
                                                       size_t max_workspace) {
  std::unique_ptr<CublasLtGemm> plan(new CublasLtGemm(context, problem, bench::LtEpilogue::kBias));
  const auto results = plan->problem_.candidates(context.handle(), max_workspace);
  if (results.front().state != CUBLAS_STATUS_SUCCESS)
    throw Error(ErrorKind::kRuntime, "cuBLASLt's first algorithm with a bias epilogue for " +
                                         problem.shape.to_string() + " is not usable: " +
                                         cublasLtGetStatusString(results.front().state));
  plan->algo_ = results.front().algo;
  plan->workspace_bytes_ = results.front().workspaceSize;
  return plan;
}

void CublasLtGemm::launch(cudaStream_t stream, const void* a, const void* b, void* c, void* workspace,
                          const void* bias) const {
  if (problem_.epilogue() == bench::LtEpilogue::kNone) {
    if (bias) throw Error(ErrorKind::kInvalidInput, "a cuBLASLt plan without a bias epilogue was given a bias");
    problem_.launch(context_.handle(), algo_, a, b, c, workspace, workspace_bytes_, stream);
    return;
  }
  std::lock_guard lock(bias_mutex_);
  problem_.launch(context_.handle(), algo_, a, b, c, workspace, workspace_bytes_, stream, bias);
}

ChoiceSets::ChoiceSets(const Problem& problem, cudaStream_t stream, const std::optional<bench::LtOperands>& caller)
    : scratch_(problem, stream, scratch_set_count(caller), bench::kLtOperandSetsBudget) {
  if (caller) {
    sets_.push_back(*caller);
    sets_.back().callers = true;
  }
  for (const bench::LtOperands& x : bench::lt_operands(scratch_)) sets_.push_back(x);
}

int scratch_set_count(const std::optional<bench::LtOperands>& caller) {
  return caller ? bench::kLtOperandSets - 1 : bench::kLtOperandSets;
}

std::optional<bench::LtOperands> caller_operands(const Problem& problem, const void* a, const void* b, void* c) {
  if (!a || !b || !c) return std::nullopt;
  const size_t element = sizeof(half);  // fp16 and bf16 alike
  const auto overlap = [](uintptr_t x, size_t x_bytes, uintptr_t y, size_t y_bytes) {
    return x < y + y_bytes && y < x + x_bytes;
  };
  const uintptr_t ua = reinterpret_cast<uintptr_t>(a), ub = reinterpret_cast<uintptr_t>(b),
                  uc = reinterpret_cast<uintptr_t>(c);
  const size_t a_bytes = size_t(problem.a_elems()) * element, b_bytes = size_t(problem.b_elems()) * element,
               c_bytes = size_t(problem.c_elems()) * element;
  if (overlap(uc, c_bytes, ua, a_bytes) || overlap(uc, c_bytes, ub, b_bytes)) return std::nullopt;
  return bench::LtOperands{a, b, c};
}

bench::LtChoice time_candidates(const CublasLtContext& context, const Problem& problem, cudaStream_t stream,
                                bench::Mode mode, const std::optional<bench::LtOperands>& caller) {
  const bench::LtProblem lt(problem);
  const auto candidates = lt.candidates(context.handle());
  const ChoiceSets x(problem, stream, caller);
  DeviceScratch<unsigned char> workspace(bench::kLtWorkspaceBytes);
  const bench::LtChoice choice =
      bench::choose_fastest(lt, context.handle(), candidates, x.sets(), workspace.ptr,
                            bench::kLtWorkspaceBytes, stream, mode, nullptr, bench::LtWorkspace::kOwn,
                            bench::LtScoring::kSlowMode);
  RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));  // the scratch is freed on return
  return choice;
}

int candidate_count(const CublasLtContext& context, const Problem& problem) {
  return int(bench::LtProblem(problem).candidates(context.handle()).size());
}

int runoff(const CublasLtContext& context, const Problem& problem, cudaStream_t stream, bench::Mode mode,
           const std::vector<int>& finalists, const std::optional<bench::LtOperands>& caller) {
  const bench::LtProblem lt(problem);
  const auto candidates = lt.candidates(context.handle());
  const ChoiceSets x(problem, stream, caller);
  DeviceScratch<unsigned char> workspace(bench::kLtWorkspaceBytes);
  const int fastest = bench::fastest_of(lt, context.handle(), candidates, finalists, x.sets(),
                                        workspace.ptr, bench::kLtWorkspaceBytes, stream, mode, nullptr,
                                        bench::LtWorkspace::kOwn, bench::LtScoring::kSlowMode);
  RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));  // the scratch is freed on return
  return fastest;
}

CublasLtChoices::Key CublasLtChoices::key_of(const Problem& p) {
  return {p.shape.m, p.shape.n, p.shape.k, int(p.layout), int(p.dtype)};
}

CublasLtChoices::CublasLtChoices(std::filesystem::path file, std::string gpu, size_t cublaslt_version)
    : file_(std::move(file), kHeader, "the cuBLASLt choices cache"), gpu_(std::move(gpu)), version_(cublaslt_version) {
  load();
}

void CublasLtChoices::load() const {
  if (file_.file().empty()) return;
  std::map<Key, std::pair<int, int>> in_file;
  for (const std::vector<std::string>& f : file_.read()) {
    // gpu names hold no commas (the CUDA runtime's names do not). fp16 lines have the header's 8 fields; other
    // element types add theirs as a 9th (which rlgemm builds without element types skip, so that they can
    // share the file).
    if ((f.size() != 8 && f.size() != 9) || f[0] != gpu_) continue;
    try {
      if (std::stoull(f[1]) != version_) continue;
      const Problem p{{std::stoll(f[2]), std::stoll(f[3]), std::stoll(f[4])}, parse_layout(f[5]),
                      f.size() == 9 ? parse_dtype(f[8]) : DType::kF16};
      const int candidate = std::stoi(f[6]), count = std::stoi(f[7]);
      if (candidate < 0 || candidate >= count) continue;
      in_file[key_of(p)] = {candidate, count};
    } catch (const std::exception&) {
    }
  }
  // What this object holds stays: a shape whose route was built on a choice keeps it.
  for (const auto& [key, choice] : in_file) chosen_.emplace(key, choice);
}

std::optional<int> CublasLtChoices::find(const Problem& p, int candidates) const {
  std::lock_guard lock(mutex_);
  auto it = chosen_.find(key_of(p));
  if (it == chosen_.end()) {  // recorded elsewhere since this one read the file?
    load();
    it = chosen_.find(key_of(p));
  }
  if (it == chosen_.end() || it->second.second != candidates) return std::nullopt;
  return it->second.first;
}

void CublasLtChoices::record(const Problem& p, int candidate, int candidates) {
  {
    std::lock_guard lock(mutex_);
    chosen_[key_of(p)] = {candidate, candidates};
  }
  std::vector<std::string> fields = {gpu_, std::to_string(version_), std::to_string(p.shape.m),
                                     std::to_string(p.shape.n), std::to_string(p.shape.k),
                                     std::string(to_string(p.layout)), std::to_string(candidate),
                                     std::to_string(candidates)};
  if (p.dtype != DType::kF16) fields.emplace_back(to_string(p.dtype));
  file_.append(fields);
}

}  // namespace rlgemm::dispatch
