// The encoded images a benchmark under bench/ runs on: the first `max` .jpg/.jpeg/.png files found
// under `dir` (recursively), read once by the caller. Exits with a message when there are none, so
// that a benchmark never measures an empty set.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace joader {

inline std::vector<std::vector<uint8_t>> read_image_files(const std::string& dir, size_t max = 200) {
  std::vector<std::vector<uint8_t>> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    const auto ext = e.path().extension();
    if (!e.is_regular_file() || (ext != ".jpg" && ext != ".jpeg" && ext != ".png")) continue;
    std::ifstream f(e.path(), std::ios::binary);
    out.emplace_back(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    if (out.size() == max) break;
  }
  if (out.empty()) {
    std::fprintf(stderr, "no .jpg/.jpeg/.png under %s (run bench/e2e/run.py once, or pass a folder)\n", dir.c_str());
    std::exit(2);
  }
  return out;
}

}  // namespace joader
