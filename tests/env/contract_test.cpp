// The kernel contract's checks that need no GPU: request parsing, the source checks, nvcc in the isolated
// compile service with its time and memory limits, and the shared object's imports, with the submissions of
// tests/env/kernels that game the reward in ways visible before anything runs.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <future>
#include <set>

#include "compile/isolated_nvrtc.h"
#include "env/contract.h"
#include "env_test_util.h"
#include "rlgemm/error.h"

namespace rlgemm::env {
namespace {

using nlohmann::json;
using testing::kernel_case;

std::string error_of(const json& request) {
  try {
    parse_request(request);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    return e.what();
  }
  return "";
}

TEST(EnvContract, ParsesTheShapeFormsAndTheLayout) {
  EXPECT_EQ(parse_request({{"source", "x"}, {"shape", "128,256,64"}}).problem.shape, (Shape{128, 256, 64}));
  EXPECT_EQ(parse_request({{"source", "x"}, {"shape", {128, 256, 64}}}).problem.shape, (Shape{128, 256, 64}));
  const Request r = parse_request({{"design", "d"}, {"shape", {{"m", 8}, {"n", 16}, {"k", 32}}}, {"layout", "nn"}});
  EXPECT_EQ(r.kind, Request::Kind::kDesign);
  EXPECT_EQ(r.problem.shape, (Shape{8, 16, 32}));
  EXPECT_EQ(r.problem.layout, Layout::kNN);
}

TEST(EnvContract, RejectsBadRequestsNamingTheRule) {
  EXPECT_NE(error_of({{"shape", "1,1,1"}}).find("exactly one of"), std::string::npos);
  EXPECT_NE(error_of({{"source", "x"}, {"design", "y"}, {"shape", "1,1,1"}}).find("exactly one of"), std::string::npos);
  EXPECT_NE(error_of({{"source", 5}, {"shape", "1,1,1"}}).find("must be a string"), std::string::npos);
  EXPECT_NE(error_of({{"source", "x"}}).find("needs \"shape\""), std::string::npos);
  EXPECT_NE(error_of({{"source", "x"}, {"shape", {1, 2}}}).find("\"shape\" must be"), std::string::npos);
  EXPECT_FALSE(error_of({{"source", "x"}, {"shape", "0,64,64"}}).empty());
  EXPECT_FALSE(error_of({{"source", "x"}, {"shape", "64,64"}}).empty());
  EXPECT_FALSE(error_of({{"source", "x"}, {"shape", "64,64,64"}, {"layout", "tt"}}).empty());
  EXPECT_NE(error_of({{"source", std::string(kMaxSourceBytes + 1, ' ')}, {"shape", "64,64,64"}}).find("over the limit"),
            std::string::npos);
  EXPECT_NE(error_of(json::array()).find("JSON object"), std::string::npos);
}

TEST(EnvContract, SourceChecksNameWhatIsMissing) {
  const std::string honest = kernel_case("honest_naive").source;
  EXPECT_FALSE(check_source(honest));
  auto no_launch = check_source("extern \"C\" __global__ void k() {}\n");
  ASSERT_TRUE(no_launch);
  EXPECT_EQ(no_launch->reason, "no_launch_function");
  // A declaration is not a definition.
  auto declared = check_source("extern \"C\" __global__ void k() {}\nextern \"C\" int rlgemm_launch(const rlgemm_problem*,"
                               " const void*, const void*, void*, void*, size_t, cudaStream_t);\n");
  ASSERT_TRUE(declared);
  EXPECT_EQ(declared->reason, "no_launch_function");
  auto no_kernel = check_source("extern \"C\" int rlgemm_launch(int x) { return 0; }\n");
  ASSERT_TRUE(no_kernel);
  EXPECT_NE(no_kernel->detail.find("__global__"), std::string::npos);
  auto cublas = check_source("#include <cublas_v2.h>\n" + honest);
  ASSERT_TRUE(cublas);
  EXPECT_EQ(cublas->reason, "cublas");
  auto big = check_source(honest + std::string(kMaxSourceBytes, '\n'));
  ASSERT_TRUE(big);
  EXPECT_EQ(big->reason, "too_large");
}

TEST(EnvContract, HonestSourceBuildsIntoASharedObjectThatPassesTheImportChecks) {
  const Build build = build_source(kernel_case("honest_splitk_workspace").source, "sm_90a");
  ASSERT_FALSE(build.rejection) << build.rejection->reason << ": " << build.rejection->detail << "\n" << build.log;
  const DynamicImports imports = dynamic_imports(build.shared_object);
  EXPECT_NE(std::find(imports.needed.begin(), imports.needed.end(), "libcudart.so.13"), imports.needed.end());
  bool launches = false;
  for (const auto& s : imports.undefined) launches |= s.rfind("__cudaLaunchKernel", 0) == 0 || s.rfind("cudaLaunchKernel", 0) == 0;
  EXPECT_TRUE(launches) << "the launch stub's runtime call is among the imports";
  EXPECT_GT(build.seconds, 0);
}

TEST(EnvContract, CompileErrorsCarryTheCompilerLogAgainstTheSubmissionsLines) {
  const std::string source = kernel_case("honest_naive").source + "\nint broken = undeclared_name;\n";
  const Build build = build_source(source, "sm_90a");
  ASSERT_TRUE(build.rejection);
  EXPECT_EQ(build.rejection->reason, "compile_error");
  EXPECT_NE(build.log.find("undeclared_name"), std::string::npos) << build.log;
  EXPECT_NE(build.log.find("submission.cu("), std::string::npos) << build.log;
  EXPECT_EQ(build.log.find("rlgemm-env-"), std::string::npos) << "the temporary folder is not shown: " << build.log;
}

TEST(EnvContract, CompileTimeAndMemoryLimitsHold) {
  const std::string source = kernel_case("honest_naive").source;
  BuildLimits quick;
  quick.timeout = std::chrono::milliseconds(50);
  const Build slow = build_source(source, "sm_90a", quick);
  ASSERT_TRUE(slow.rejection);
  EXPECT_EQ(slow.rejection->reason, "compile_error");
  EXPECT_NE(slow.rejection->detail.find("exceeded"), std::string::npos) << slow.rejection->detail;
  EXPECT_LT(slow.seconds, 5.0);
  BuildLimits small;
  small.memory_bytes = uint64_t(64) << 20;
  const Build starved = build_source(source, "sm_90a", small);
  ASSERT_TRUE(starved.rejection);
  EXPECT_EQ(starved.rejection->reason, "compile_error");
}

// Every submission of tests/env/kernels through nvcc and the import checks: those that game the reward in a way
// the imports show are rejected with their reason before any GPU time, and every other one builds cleanly (so
// that on the GPU each meets the check meant for it).
TEST(EnvContract, EveryKernelCaseBuildsOrIsRejectedByItsImports) {
  const std::set<std::string> static_reasons = {"cublas", "allocation", "host_sync", "other_stream", "forbidden_symbol"};
  const auto cases = testing::kernel_cases();
  ASSERT_GE(cases.size(), 20u);
  std::vector<std::future<Build>> builds;
  for (const auto& c : cases)
    builds.push_back(std::async(std::launch::async, [&c] { return build_source(c.source, "sm_90a"); }));
  int static_cases = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    const Build build = builds[i].get();
    if (static_reasons.count(c.reason)) {
      ++static_cases;
      ASSERT_TRUE(build.rejection) << c.name << " passed the import checks";
      EXPECT_EQ(build.rejection->reason, c.reason) << c.name << ": " << build.rejection->detail;
      EXPECT_FALSE(build.rejection->detail.empty());
    } else {
      EXPECT_FALSE(build.rejection) << c.name << ": " << build.rejection->reason << ": " << build.rejection->detail
                                    << "\n" << build.log;
    }
  }
  EXPECT_GE(static_cases, 6);
}

// _FORTIFY_SOURCE (on by default with -O2 in some distributions' compilers) turns printf, memcpy, fread, ... into
// checked variants: each is allowed where its function is, and refused where its function is, by that name.
TEST(EnvContract, FortifiedImportsAreJudgedAsTheFunctionsTheyCheck) {
  DynamicImports allowed{{"libc.so.6", "libcudart.so.13"},
                         {"__printf_chk@GLIBC_2.3.4", "__fprintf_chk@GLIBC_2.3.4", "__snprintf_chk@GLIBC_2.3.4",
                          "__sprintf_chk@GLIBC_2.3.4", "__vsnprintf_chk@GLIBC_2.3.4", "__vfprintf_chk@GLIBC_2.3.4",
                          "__memcpy_chk@GLIBC_2.3.4", "__memset_chk@GLIBC_2.3.4", "__memmove_chk@GLIBC_2.3.4",
                          "cudaLaunchKernel@libcudart.so.13"}};
  const auto ok = check_imports(allowed);
  EXPECT_FALSE(ok) << ok->detail;
  const std::pair<const char*, const char*> refused[] = {
      {"__fread_chk@GLIBC_2.7", "fread"}, {"__strcpy_chk@GLIBC_2.3.4", "strcpy"}, {"__read_chk@GLIBC_2.4", "read"},
      {"__open_2@GLIBC_2.7", "open"}, {"__fgets_chk@GLIBC_2.4", "fgets"}};
  for (const auto& [symbol, function] : refused) {
    DynamicImports imports = allowed;
    imports.undefined.push_back(symbol);
    const auto why = check_imports(imports);
    ASSERT_TRUE(why) << symbol << " passed";
    EXPECT_EQ(why->reason, "forbidden_symbol") << symbol;
    EXPECT_NE(why->detail.find(std::string("calls ") + function + " "), std::string::npos) << why->detail;
  }
  // Not every name ending in _chk is a fortified function, and the plain names are judged as before.
  EXPECT_FALSE(check_imports({{}, {"__stack_chk_fail@GLIBC_2.4", "printf", "memcpy"}}));
  const auto plain = check_imports({{}, {"fread@GLIBC_2.2.5"}});
  ASSERT_TRUE(plain);
  EXPECT_NE(plain->detail.find("calls fread,"), std::string::npos) << plain->detail;
}

// The same on a real build: the honest kernel that prints its choice, compiled by an nvcc whose host compiler
// fortifies (as Ubuntu's g++ does by default), imports __printf_chk and is accepted.
TEST(EnvContract, AFortifyingHostCompilerDoesNotTurnAnHonestKernelAway) {
  const auto dir = std::filesystem::temp_directory_path() / ("rlgemm-env-fortify-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto wrapper = dir / "nvcc";
  {
    std::ofstream out(wrapper);
    out << "#!/bin/sh\nexec '" << nvcc_path() << "' -Xcompiler -D_FORTIFY_SOURCE=2 -Xcompiler -O2 \"$@\"\n";
  }
  std::filesystem::permissions(wrapper, std::filesystem::perms::owner_all);
  const char* before = std::getenv("RLGEMM_NVCC");
  const std::string saved = before ? before : "";
  ::setenv("RLGEMM_NVCC", wrapper.c_str(), 1);
  const Build build = build_source(kernel_case("honest_queries_device").source, "sm_90a");
  if (before)
    ::setenv("RLGEMM_NVCC", saved.c_str(), 1);
  else
    ::unsetenv("RLGEMM_NVCC");
  std::filesystem::remove_all(dir);
  ASSERT_FALSE(build.shared_object.empty()) << build.log;
  const DynamicImports imports = dynamic_imports(build.shared_object);
  EXPECT_NE(std::find_if(imports.undefined.begin(), imports.undefined.end(),
                         [](const std::string& s) { return s.rfind("__printf_chk", 0) == 0; }),
            imports.undefined.end())
      << "the build was not fortified, so this test shows nothing";
  EXPECT_FALSE(build.rejection) << build.rejection->reason << ": " << build.rejection->detail;
}

// The cases that must fault on the GPU keep their fault in the device code nvcc makes of them: a store through a
// pointer the compiler can prove null is undefined behaviour that it deletes, leaving a kernel that only writes a
// wrong C (wrong_result, not fault).
std::string device_ptx(const std::string& source) {
  const auto dir = std::filesystem::temp_directory_path() / ("rlgemm-env-ptx-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string input = (dir / "submission.cu").string(), output = (dir / "submission.ptx").string();
  {
    std::ofstream out(input);
    out << contract_prelude() << source;
  }
  NvrtcJob job;
  job.name = "submission.cu";
  job.exec = {nvcc_path(), "-ptx", "-O3", "-std=c++17", "-arch=sm_90a", "-o", output, input};
  job.output = output;
  const NvrtcOutcome outcome = compile_isolated(job, std::chrono::minutes(2));
  std::filesystem::remove_all(dir);
  EXPECT_TRUE(outcome.ok()) << outcome.detail << "\n" << outcome.log;
  return std::string(outcome.cubin.begin(), outcome.cubin.end());
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(EnvContract, TheFaultCasesKeepTheirFaultInTheDeviceCode) {
  int faults = 0;
  for (const auto& c : testing::kernel_cases()) {
    if (c.reason != "fault") continue;
    ++faults;
    const std::string ptx = device_ptx(c.source);
    if (c.name == "trap") {
      EXPECT_NE(ptx.find("trap;"), std::string::npos) << ptx;
    } else {
      // C's store and the one through the null pointer.
      EXPECT_GE(count_of(ptx, "st.global"), 2u) << c.name << ":\n" << ptx;
    }
  }
  EXPECT_EQ(faults, 2);
}

TEST(EnvContract, ImportsOfSomethingThatIsNotAnElfAreAnError) {
  EXPECT_THROW(dynamic_imports(std::vector<char>{'n', 'o', 't'}), Error);
  std::vector<char> truncated = {0x7f, 'E', 'L', 'F', 2};
  truncated.resize(80, 0);
  EXPECT_THROW(dynamic_imports(truncated), Error);
}

}  // namespace
}  // namespace rlgemm::env
