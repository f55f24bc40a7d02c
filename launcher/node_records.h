#pragma once
// The launchers' records in the job's store (runtime/store/record.h: one-line JSON objects that
// only fastrun's launchers read), each encoded and decoded here and nowhere else:
//   fastrun/launcher/node/<k>   NodeEntry   {"ranks":4,"host":"h","pid":123[,"rank_master_addr":"a","rank_master_port":p]}
//   fastrun/launcher/failure    NodeFailure {"exit_code":1,"node":2,"why":"...","final":true}
//   fastrun/launcher/attempt/<n>/members   an attempt's nodes, "0,1,3" (--nnodes MIN:MAX)
// Decoding a malformed record is a StoreError naming the key, the field and what is accepted.
#include <string>
#include <vector>

namespace fastrun::launcher {

// What a node's launcher says about itself at the node rendezvous (launcher/node_rendezvous.cpp).
struct NodeEntry {
  int ranks = 0;  // the ranks it starts
  std::string host;
  long pid = 0;   // the launcher's
  // With --external-store: where this node's ranks' MASTER_ADDR/MASTER_PORT would point when it
  // holds the job's rank 0 (its address towards the store host, a port free there); "" / 0 when
  // the coordinator picks them (node 0 of a job without --store-only). Stored only when set.
  std::string rank_master_addr;
  int rank_master_port = 0;
};

std::string encode(const NodeEntry& e);
NodeEntry decode_node_entry(int node_rank, const std::string& text);

// A node's failure as the node watch records it (launcher/node_watch.h; the first one wins).
struct NodeFailure {
  int exit_code = 1;
  int node = 0;     // the node rank in the attempt; -1: the store-only launcher (--store-only)
  std::string why;  // names node, host and rank
  bool store_lost = false;  // node 0's store is unreachable: nothing more can be recorded there (not stored)
  // The job ends here whatever --max-restarts allows: a signal to a launcher, a lost node
  // (node_attempts.h). Stored only when true ("final": true).
  bool final = false;
  // The node's launcher stopped answering (node_watch.h). Final for a fixed set of nodes; with
  // --nnodes MIN:MAX the others go on without it (node_attempts.h). Stored only when true.
  bool lost = false;
  // A node came back and asks to join (--nnodes MIN:MAX): the attempt stops on every node and the
  // next one runs with it (node_attempts.h). Stored only when true.
  bool joining = false;
};

std::string encode(const NodeFailure& f);
NodeFailure decode_node_failure(const std::string& text);

// An elastic job's attempt members (node_attempts.h): their --node-rank, ascending, node 0 first,
// as "0,1,3". Decoding anything else is a StoreError naming `key`.
std::string encode_members(const std::vector<int>& members);
std::vector<int> decode_members(const std::string& key, const std::string& text);

}  // namespace fastrun::launcher
