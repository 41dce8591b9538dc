// From a request to what a run simulates (sim/run_build.cpp), shared by the library's calls on one
// run (api.cpp) and on several (studies.cpp). Not part of the library's interface, sim/api.h.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/session.h"
#include "sim/api.h"
#include "sim/config.h"
#include "workloads/workload.h"

namespace ascendsim::sim {

/// The workload as the request lays it out (request_workload of sim/api.h).
workloads::Workload build_workload(const RunRequest& r, const SystemConfig& cfg);
/// The workload with its dataset: the default one, or the files in `dataset`; one shard of it.
workloads::Workload build_workload_with_data(const RunRequest& r, const SystemConfig& cfg);
/// Devices of one server for the request: its rank table's, else the server preset's.
std::int64_t devices_per_server(const RunRequest& r, const SystemConfig& cfg);
/// The session of strategy `s` for the request's workload `w` (epochs, sink size, evaluation).
runtime::Session make_session(const RunRequest& r, const workloads::Workload& w, runtime::Strategy s);

/// "data: ...; server NAME: host ..." for the report header.
std::string setting_line(const SystemConfig& cfg, const workloads::Workload& w);
/// The recipe as the report gives it.
nlohmann::ordered_json recipe_json(const workloads::Recipe& r);
/// Every parameter's value in `cfg`, as the report gives them.
nlohmann::ordered_json resolved_params(const SystemConfig& cfg);

}  // namespace ascendsim::sim
