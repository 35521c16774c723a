// The cubin cache: keys cover everything that decides a cubin, entries land atomically, and corrupt
// entries are detected and replaced. Also SHA-256 against the FIPS 180-4 examples.
#include "compile/cubin_cache.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "compile/compiler.h"
#include "compile/sha256.h"

namespace rlgemm {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / ("rlgemm-cache-test-" + std::to_string(::getpid()) + "-" +
                                         std::to_string(counter_++));
    fs::remove_all(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
  static inline int counter_ = 0;
};

TEST(Sha256, StandardVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  Sha256 million;
  const std::string chunk(1000, 'a');
  for (int i = 0; i < 1000; ++i) million.update(chunk);
  EXPECT_EQ(million.hex_digest(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // Fields are length-prefixed: moving a boundary changes the hash.
  EXPECT_NE(Sha256().field("ab").field("c").hex_digest(), Sha256().field("a").field("bc").hex_digest());
}

TEST(CubinCache, KeyCoversSourceArchOptionsAndName) {
  const GeneratedKernel k{"k", "extern \"C\" __global__ void k() {}", "sm_80"};
  const auto options = nvrtc_options("sm_80");
  const std::string key = cache_key(k, options);
  EXPECT_EQ(key.size(), 64u);
  EXPECT_EQ(key, cache_key(k, options));
  GeneratedKernel other = k;
  other.source += " ";
  EXPECT_NE(cache_key(other, options), key);
  other = k;
  other.arch = "sm_90a";
  EXPECT_NE(cache_key(other, options), key);
  other = k;
  other.name = "k2";
  EXPECT_NE(cache_key(other, options), key);
  auto more = options;
  more.push_back("-G");
  EXPECT_NE(cache_key(k, more), key);
  EXPECT_NE(cache_key(k, nvrtc_options("sm_90a")), key);
}

TEST(CubinCache, StoresLoadsAndDetectsCorruption) {
  TempDir dir;
  CubinCache cache(dir.path());
  const std::string key(64, 'a');
  EXPECT_FALSE(cache.load(key));
  CachedKernel entry{{'\x7f', 'E', 'L', 'F', '\0', '\1', '\2'}, "Used 10 registers"};
  cache.store(key, entry);
  auto hit = cache.load(key);
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->cubin, entry.cubin);
  EXPECT_EQ(hit->log, entry.log);

  // Flip one payload byte: the checksum catches it and the entry goes.
  {
    std::fstream f(cache.entry_path(key), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-2, std::ios::end);
    f.put('X');
  }
  EXPECT_FALSE(cache.load(key));
  EXPECT_FALSE(fs::exists(cache.entry_path(key)));

  // A truncated entry (a writer that died mid-way would leave none, but a disk might).
  cache.store(key, entry);
  fs::resize_file(cache.entry_path(key), fs::file_size(cache.entry_path(key)) - 3);
  EXPECT_FALSE(cache.load(key));
  // Garbage.
  std::ofstream(cache.entry_path(key)) << "not a cubin";
  EXPECT_FALSE(cache.load(key));
}

TEST(CubinCache, ConcurrentWritersLeaveOneWholeEntry) {
  TempDir dir;
  CubinCache cache(dir.path());
  const std::string key(64, 'b');
  CachedKernel entry{std::vector<char>(1 << 20, 'z'), "log"};
  std::atomic<int> bad_reads{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 10; ++i) {
        cache.store(key, entry);
        auto hit = cache.load(key);  // a reader sees a whole entry or none, never a torn one
        if (hit && hit->cubin != entry.cubin) ++bad_reads;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad_reads.load(), 0);
  ASSERT_TRUE(cache.load(key));
  int files = 0;
  for (auto& f : fs::directory_iterator(dir.path())) {
    ++files;
    EXPECT_EQ(f.path().filename().string().find(".tmp."), std::string::npos) << f.path();
  }
  EXPECT_EQ(files, 1);
}

TEST(CubinCache, CompileUsesAndRepairsTheCache) {
  TempDir dir;
  CompileOptions options;
  options.cache_dir = dir.path();
  const auto kernel = generate_kernel(parse_design("test.wrong"), Problem{{8, 8, 8}, Layout::kTN});
  const CompiledKernel first = compile_kernel(kernel, options);
  EXPECT_FALSE(first.from_cache);
  EXPECT_GT(first.compile_seconds, 0);
  const CompiledKernel second = compile_kernel(kernel, options);
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(second.cubin, first.cubin);
  EXPECT_EQ(second.resources.registers, first.resources.registers);
  // Corrupt the entry: the next compile notices, recompiles and rewrites it.
  const auto path = CubinCache(dir.path()).entry_path(first.cache_key);
  ASSERT_TRUE(fs::exists(path));
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x55');
    f.put('\xaa');
  }
  const CompiledKernel third = compile_kernel(kernel, options);
  EXPECT_FALSE(third.from_cache);
  EXPECT_EQ(third.cubin, first.cubin);
  EXPECT_TRUE(compile_kernel(kernel, options).from_cache);
}

TEST(CubinCache, DefaultDirectoryFollowsTheEnvironment) {
  const char* saved = std::getenv("RLGEMM_CACHE_DIR");
  const std::string saved_value = saved ? saved : "";
  ::setenv("RLGEMM_CACHE_DIR", "/tmp/somewhere", 1);
  EXPECT_EQ(CubinCache::default_dir(), fs::path("/tmp/somewhere"));
  ::setenv("RLGEMM_CACHE_DIR", "off", 1);
  EXPECT_FALSE(CubinCache::default_dir());
  ::unsetenv("RLGEMM_CACHE_DIR");
  if (std::getenv("HOME") && !std::getenv("XDG_CACHE_HOME"))
    EXPECT_EQ(CubinCache::default_dir(), fs::path(std::getenv("HOME")) / ".cache" / "rlgemm" / "cubins");
  if (saved) ::setenv("RLGEMM_CACHE_DIR", saved_value.c_str(), 1);
}

}  // namespace
}  // namespace rlgemm
