#pragma once
// A fresh directory under /tmp for one test, removed with everything in it when destroyed.
//   test::TempDir dir("fastrun-ckpt");     // /tmp/fastrun-ckpt-XXXXXX
//   write(dir / "ck");                     // a path inside, as a string
//   CHECK(dir.names() == std::vector<std::string>{"ck"});
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace fastrun::test {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "fastrun-test") {
    std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed for " + tmpl);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  // The names of the entries in the directory, sorted (what a test expects to be left there).
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(path_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace fastrun::test
