#include "sass/optimize.h"

#include <map>

#include "rlgemm/error.h"

namespace rlgemm::sass {
namespace {

GpuEvaluatorFactory& gpu_factory() {
  static GpuEvaluatorFactory factory;
  return factory;
}

}  // namespace

void set_gpu_evaluator_factory(GpuEvaluatorFactory factory) { gpu_factory() = std::move(factory); }

std::unique_ptr<Evaluator> make_evaluator(const std::string& kind, const GpuEvaluationTarget* target) {
  if (kind == "synthetic") return std::make_unique<SyntheticEvaluator>();
  if (kind == "gpu") {
    if (!gpu_factory())
      fail("--evaluator gpu is not available in this build: no GPU evaluator is linked (use --evaluator synthetic)");
    if (!target)
      fail("--evaluator gpu runs the kernel, so it needs the design and problem the cubin was compiled for: "
           "add --design, --shape and --layout");
    return gpu_factory()(*target);
  }
  fail("unknown evaluator '" + kind + "': expected synthetic or gpu");
}

std::vector<std::string> verify_patch(const Cubin& original, const KernelCode& code, const std::vector<int>& order,
                                      const std::vector<uint8_t>& patched, const std::vector<ControlFields>* controls) {
  std::vector<std::string> problems = check_invariants(code, order, controls);
  if (controls) {
    const auto more = check_controls(code, order, *controls);
    problems.insert(problems.end(), more.begin(), more.end());
  }
  if (!problems.empty()) return problems;
  const Cubin reread = Cubin::parse(patched, "patched cubin");
  const KernelText before = original.kernel(code.text().name);
  const KernelText after = reread.kernel(code.text().name);
  for (size_t s = 0; s < order.size(); ++s)
    if (!(after.words[s] == (controls ? encode_control(before.words[order[s]], (*controls)[order[s]]) : before.words[order[s]])))
      problems.push_back("slot " + std::to_string(s) + " does not hold the moved word");
  std::vector<int> slot_of(order.size());
  for (size_t s = 0; s < order.size(); ++s) slot_of[order[s]] = int(s);
  if (after.offset_refs.size() != before.offset_refs.size()) problems.push_back("offset references changed in number");
  for (size_t i = 0; i < std::min(after.offset_refs.size(), before.offset_refs.size()); ++i) {
    const auto& b = before.offset_refs[i];
    const auto& a = after.offset_refs[i];
    const uint64_t want = uint64_t(slot_of[b.value / kInstructionBytes]) * kInstructionBytes + b.value % kInstructionBytes;
    if (a.value != want) problems.push_back("offset reference " + std::to_string(i) + " does not follow its instruction");
  }
  const DisasmFunction dis = disassemble_kernel(patched, code.text().name);
  if (dis.instructions.size() != order.size()) {
    problems.push_back("nvdisasm lists a different number of instructions");
    return problems;
  }
  // Reuse flags are control bits that nvdisasm prints in the operands: compared separately (the words).
  auto text = [&](std::string t) {
    if (controls)
      for (size_t at; (at = t.find(".reuse")) != std::string::npos;) t.erase(at, 6);
    return t;
  };
  std::map<std::string, int> multiset;
  for (size_t s = 0; s < order.size(); ++s) {
    const std::string want = text(code.at(order[s]).dis.text());
    const std::string got = text(dis.instructions[s].text());
    ++multiset[want];
    --multiset[got];
    if (want != got && problems.size() < 10)
      problems.push_back("slot " + std::to_string(s) + " disassembles as '" + got + "', expected '" + want + "'");
  }
  for (const auto& [text, count] : multiset)
    if (count != 0) {
      problems.push_back("the multiset of instructions changed (" + text + ")");
      break;
    }
  return problems;
}

std::string ScheduleChanges::to_string() const {
  return "displaced=" + std::to_string(displaced) + " stall=" + std::to_string(stall) +
         " yield=" + std::to_string(yield) + " reuse=" + std::to_string(reuse);
}

ScheduleChanges schedule_changes(const KernelText& compiled, const std::vector<int>& order,
                                 const std::vector<ControlFields>& controls) {
  ScheduleChanges c;
  for (size_t s = 0; s < order.size(); ++s) c.displaced += order[s] != int(s);
  for (size_t i = 0; i < controls.size() && i < compiled.words.size(); ++i) {
    const ControlFields was = decode_control(compiled.words[i]);
    c.stall += controls[i].stall != was.stall;
    c.yield += controls[i].yield != was.yield;
    c.reuse += controls[i].reuse != was.reuse;
  }
  return c;
}

SassOptReport optimize_kernel(const Cubin& cubin, const std::string& kernel, Evaluator& evaluator,
                              const std::string& agent, int steps, uint64_t seed, ActionSpace actions, int confirm) {
  if (steps < 1) fail("--steps must be at least 1");
  if (confirm < 0) fail("--confirm must be at least 0");
  if (agent != "ppo" && agent != "anneal" && agent != "greedy")
    fail("unknown agent '" + agent + "': expected ppo, anneal or greedy");
  const KernelCode code = KernelCode::load(cubin, kernel);
  Game game(code, evaluator, [&](const Schedule& s) { return cubin.write(s.text(), s.order()); }, actions);
  SearchOptions search{steps, seed, 32, confirm};
  SassOptReport report;
  report.instructions = code.size();
  report.movable = code.movable().size();
  report.notes = code.notes;
  if (agent == "ppo") report.search = search_ppo(game, search);
  else if (agent == "anneal") report.search = search_anneal(game, search);
  else report.search = search_greedy(game, search);
  Schedule best(code, actions);
  for (const auto& step : report.search.path) best.apply(step.move);
  std::vector<uint8_t> patched = cubin.write(best.text(), best.order());
  report.problems = verify_patch(cubin, code, report.search.best_order, patched, &report.search.best_controls);
  if (report.problems.empty()) {
    // The chosen schedule is measured once more: it must still run and give identical output.
    if (best.order() != report.search.best_order || best.controls() != report.search.best_controls)
      report.problems.push_back("replaying the moves does not give the best schedule");
    const Measurement m = game.measure(best);
    if (!m.ok) report.problems.push_back("the best schedule failed its final evaluation: " + m.failure);
  }
  if (report.problems.empty()) report.patched = std::move(patched);
  report.changes = schedule_changes(code.text(), report.search.best_order, report.search.best_controls);
  return report;
}

SassOptReport run_sass_opt(const SassOptOptions& options) {
  if (options.steps < 1) fail("--steps must be at least 1");
  if (options.agent != "ppo" && options.agent != "anneal" && options.agent != "greedy")
    fail("unknown agent '" + options.agent + "': expected ppo, anneal or greedy");
  const Cubin cubin = Cubin::load(options.cubin_path);
  auto evaluator = make_evaluator(options.evaluator, nullptr);
  SassOptReport report =
      optimize_kernel(cubin, options.kernel, *evaluator, options.agent, options.steps, options.seed, options.actions,
                      options.confirm);
  if (report.problems.empty() && !options.out_path.empty()) {
    write_file_atomically(options.out_path, report.patched);
    report.written = true;
  }
  return report;
}

}  // namespace rlgemm::sass
