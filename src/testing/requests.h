// The daemon's requests as the engine's and the serving state's tests build them (tests only).
#pragma once

#include <cstdint>
#include <string>

#include "common/protocol.h"
#include "joader.pb.h"

namespace joader::test_support {

// A synthetic dataset of `items` 12×10 JPEGs, center-cropped to 8×8 (192 bytes per item).
inline v1::AddDatasetRequest synthetic(const std::string& name, int items) {
  v1::AddDatasetRequest r;
  r.set_protocol_version(kProtocolVersion);
  r.set_name(name);
  r.set_source("synthetic:" + std::to_string(items) + ":12x10");
  r.set_crop(8);
  return r;
}

inline v1::Register job_request(const std::string& dataset, uint32_t batch, uint32_t epochs, uint32_t prefetch) {
  v1::Register r;
  r.set_protocol_version(kProtocolVersion);
  r.set_dataset(dataset);
  r.set_batch_size(batch);
  r.set_epochs(epochs);
  r.set_prefetch(prefetch);
  return r;
}

}  // namespace joader::test_support
