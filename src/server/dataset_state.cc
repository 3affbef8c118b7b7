#include "server/dataset_state.h"

#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/protocol.h"
#include "common/source_spec.h"

namespace joader {

bool DatasetStateFile::save(const std::vector<SavedDataset>& datasets) const {
  nlohmann::json list = nlohmann::json::array();
  for (const SavedDataset& d : datasets) {
    const v1::AddDatasetRequest& r = d.spec;
    list.push_back({{"name", r.name()}, {"source", r.source()}, {"raw", r.raw()}, {"resize", r.resize()},
                    {"crop", r.crop()}, {"on_error", r.on_error() == "skip" ? "skip" : "fail"},
                    {"fingerprint", d.fingerprint}, {"items", d.items}});
  }
  const std::string tmp = path_ + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << nlohmann::json{{"version", 1}, {"datasets", list}}.dump(1) << "\n";
    if (!out) return false;
  }
  return std::rename(tmp.c_str(), path_.c_str()) == 0;
}

std::vector<SavedDataset> DatasetStateFile::load() const {
  std::vector<SavedDataset> out;
  std::ifstream in(path_);
  if (!in) return out;  // nothing saved yet
  try {
    const nlohmann::json doc = nlohmann::json::parse(in);
    for (const auto& d : doc.at("datasets")) {
      SavedDataset saved;
      v1::AddDatasetRequest& req = saved.spec;
      req.set_protocol_version(kProtocolVersion);
      req.set_name(d.at("name").get<std::string>());
      req.set_source(absolute_source(d.at("source").get<std::string>()));
      req.set_raw(d.at("raw").get<bool>());
      req.set_resize(d.at("resize").get<uint32_t>());
      req.set_crop(d.at("crop").get<uint32_t>());
      req.set_on_error(d.at("on_error").get<std::string>());
      saved.fingerprint = d.value("fingerprint", std::string());
      saved.items = d.value("items", uint64_t{0});
      out.push_back(std::move(saved));
    }
  } catch (const nlohmann::json::exception& e) {
    throw DatasetStateError(path_ + " is not a valid dataset list: " + e.what());
  }
  return out;
}

}  // namespace joader
