#pragma once
// Gloo's tcp transport checks what arrives in its own device-loop thread and throws
// gloo::EnforceNotMet there when a peer sends more bytes than this rank's posted receive holds:
// exactly what happens when ranks issue different collectives (another count, dtype, op or
// root; gloo/transport/tcp/pair.cc, "op.preamble.length <= op.nbytes"). Nothing can catch an
// exception in a thread Gloo owns, so the process would die of SIGABRT in std::terminate.
//
// This turns that into an ordinary failure: a terminate handler, installed once, recognises an
// EnforceNotMet escaping one of Gloo's transport threads (their thread ids are recorded when a
// group's device and mesh are made), tells every live gloo group of the process (each fails its
// pending and later ops with a BackendError that says the ranks disagree, and records the
// failure for the job), and parks that thread for good instead of aborting. The group's Gloo
// context is then kept alive until exit (destroying it would join the parked thread). Any other
// uncaught exception goes to the handler that was installed before.
//
// Why an op on the caller's buffers (over 2 MiB, group_runtime.h) whose transport failed fails
// only at the op timeout (docs/collectives.md, "When ranks disagree"; fingerprint_prelude.h keeps
// every such op but all_to_allv from meeting a mismatching op's data): nothing unwinds the parked thread, so
// it keeps the failing pair's mutex (Pair::handleEvents) and a reference to the receive buffer
// it was filling, and it was the device's only I/O thread. The op's thread waits inside a Gloo
// collective on a buffer Gloo owns; the data never comes, the buffer's abort is out of reach,
// signalling the pair needs the held mutex (and Gloo moved that buffer out of the pair's
// pending lists), so only its timeout wakes it, after which Gloo's pair closing blocks on the
// parked thread for good. Returning from wait() earlier could let that thread go on writing the
// caller's buffer (Gloo's local copies, the reduction) after the caller freed it.
// The prelude, and FASTRUN_DEBUG=sequence for every op, catch a mismatch before any data moves.
#include <functional>
#include <set>
#include <string>

#include <sys/types.h>

namespace fastrun::gloo_backend {

// Thread ids of this process (from /proc/self/task).
std::set<pid_t> current_threads();
// Records the threads that appeared since `before` as Gloo transport threads, and installs the
// terminate handler (once). Returns them (a group's own: is_current_thread_in tells a listener
// whether the failing thread is its group's).
std::set<pid_t> adopt_transport_threads(const std::set<pid_t>& before);
bool is_current_thread_in(const std::set<pid_t>& threads);

// Called (from the failing Gloo thread) with the text of the failure. Returns an id for
// stop_listening.
int listen_for_transport_failure(std::function<void(const std::string& what)> listener);
void stop_listening(int id);

}  // namespace fastrun::gloo_backend
