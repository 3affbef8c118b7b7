// A temporary folder for a test, deleted with everything in it when the object goes (tests only).
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>

namespace joader::test_support {

struct TempDir {
  explicit TempDir(const std::string& parent = "/tmp") {
    std::string tmpl = parent + "/joader-test-XXXXXX";
    path = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string path;
};

}  // namespace joader::test_support
