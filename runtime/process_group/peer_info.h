#pragma once
// What every rank publishes about itself when it joins, in the job's (unprefixed) store under
// "fastrun/peer/<global rank>": host name, pid and device identity ("cpu", or the PCI bus id
// of the rank's CUDA device). Backends read it to name a dead peer (a closed socket tells a
// Gloo rank *that* a peer went away, the pid tells it *which*).
#include <optional>
#include <string>
#include <vector>

#include "fastrun/runtime/store/job_keys.h"
#include "fastrun/runtime/store/store.h"

namespace fastrun {

struct PeerInfo {
  int rank = 0;
  std::string host;
  long pid = 0;
  std::string device = "cpu";
  // The launcher's node (FASTRUN_NODE_RANK), -1 when unknown. Two launchers on one host are two
  // nodes: `auto` keeps shm within a node (their segments and cleanup are per launcher).
  int node = -1;

  // "host#node": where the rank runs, as `auto` and the hier backend tell nodes apart.
  std::string place() const;

  // {"host":"h","pid":123,"device":"cpu","node":0}: a JSON record (runtime/store/record.h).
  std::string encode() const;
  // StoreError naming peer_key(rank), the field and what is accepted on a malformed value.
  static PeerInfo decode(int rank, const std::string& text);
};

PeerInfo local_peer_info(int rank, const std::string& device_identity);

// Reads the published info of `ranks` (missing ones are skipped). Never throws.
std::vector<PeerInfo> read_peer_infos(Store& store, const std::vector<int>& ranks);

// Among `peers`, those on this host whose process is gone (or a zombie). Waits up to `grace`
// for a process that is closing its sockets to finish dying.
std::vector<int> dead_local_peers(const std::vector<PeerInfo>& peers, Duration grace);

std::string this_host_name();

}  // namespace fastrun
