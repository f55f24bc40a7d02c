#include "fastrun/launcher/output_relay.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/os/full_io.h"

namespace fastrun::launcher {

OutputRelay::OutputRelay(RelayOptions options) : options_(std::move(options)) {}

void OutputRelay::add_rank(int rank) {
  RankState& st = ranks_[rank];
  if (options_.log_dir.empty()) return;
  const std::string dir = rank_log_dir(rank);
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) throw_errno("creating log directory " + dir, errno);
  const char* names[2] = {"stdout.log", "stderr.log"};
  for (int s = 0; s < 2; ++s) {
    const std::string path = dir + "/" + names[s];
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) throw_errno("creating log file " + path, errno);
    st.streams[s].file.reset(fd);
  }
}

std::string OutputRelay::rank_log_dir(int rank) const {
  return options_.log_dir.empty() ? std::string() : fmt::format("{}/rank-{}", options_.log_dir, options_.rank_offset + rank);
}

bool OutputRelay::shown(int rank, Stream s) const {
  if (options_.rank_offset + rank == 0) return true;
  switch (options_.output) {
    case OutputMode::all: return true;
    case OutputMode::only_error: return s == Stream::err;
    case OutputMode::ignore: return false;
  }
  return true;
}

void OutputRelay::emit(int rank, Stream s, const char* data, std::size_t size) {
  const int idx = static_cast<int>(s);
  if (!shown(rank, s) || !terminal_ok_[idx] || size == 0) return;
  const int fd = idx == 0 ? options_.terminal_out : options_.terminal_err;
  if (!options_.tag_output) {
    note_terminal_write(idx, os::write_all(fd, data, size));
    return;
  }
  const std::string tag = fmt::format("[rank {}] ", options_.rank_offset + rank);
  scratch_.clear();
  const char* end = data + size;
  for (const char* p = data; p < end;) {
    const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)));
    const char* line_end = nl ? nl + 1 : end;
    scratch_ += tag;
    scratch_.append(p, line_end);
    p = line_end;
  }
  note_terminal_write(idx, os::write_all(fd, scratch_.data(), scratch_.size()));
}

void OutputRelay::note_terminal_write(int idx, bool ok) {
  if (ok) return;
  terminal_ok_[idx] = false;  // stop writing there; the files keep getting everything
  if (errno == EPIPE) console_closed_ = true;
}

void OutputRelay::remember_tail(RankState& st, const char* data, std::size_t size) {
  // `data` holds whole lines (it ends with '\n'). Only its last kTailLines lines can survive:
  // find where they start, walking back over line starts.
  const char* end = data + size;
  const char* start = data;
  std::size_t starts = 0;
  for (const char* p = end - 1; p > data; --p) {
    if (p[-1] == '\n' && ++starts == kTailLines) {
      start = p;
      break;
    }
  }
  for (const char* p = start; p < end;) {
    const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)));
    const char* line_end = nl ? nl : end;
    st.tail.emplace_back(p, std::min<std::size_t>(static_cast<std::size_t>(line_end - p), 400));
    if (st.tail.size() > kTailLines) st.tail.pop_front();
    p = nl ? nl + 1 : end;
  }
}

void OutputRelay::feed(int rank, Stream s, const char* data, std::size_t size) {
  RankState& st = ranks_[rank];
  StreamState& ss = st.streams[static_cast<int>(s)];
  if (ss.file && !os::write_all(ss.file.get(), data, size)) {
    ss.file.reset();  // disk full or similar: stop filing this stream rather than stop the job
  }
  // Whole lines: [partial + data up to the last newline].
  const char* last_nl = nullptr;
  for (const char* p = data + size; p > data;) {
    --p;
    if (*p == '\n') { last_nl = p; break; }
  }
  if (!last_nl) {
    ss.partial.append(data, size);
    if (ss.partial.size() >= kMaxLine) {  // an endless line: cut it rather than grow without bound
      ss.partial += '\n';
      if (s == Stream::err) remember_tail(st, ss.partial.data(), ss.partial.size());
      emit(rank, s, ss.partial.data(), ss.partial.size());
      ss.partial.clear();
    }
    return;
  }
  const std::size_t whole = static_cast<std::size_t>(last_nl - data) + 1;
  if (!ss.partial.empty()) {
    ss.partial.append(data, whole);
    if (s == Stream::err) remember_tail(st, ss.partial.data(), ss.partial.size());
    emit(rank, s, ss.partial.data(), ss.partial.size());
    ss.partial.clear();
  } else {
    if (s == Stream::err) remember_tail(st, data, whole);
    emit(rank, s, data, whole);
  }
  ss.partial.assign(data + whole, size - whole);
}

void OutputRelay::close_stream(int rank, Stream s) {
  RankState& st = ranks_[rank];
  StreamState& ss = st.streams[static_cast<int>(s)];
  if (!ss.partial.empty()) {
    ss.partial += '\n';
    if (s == Stream::err) remember_tail(st, ss.partial.data(), ss.partial.size());
    emit(rank, s, ss.partial.data(), ss.partial.size());
    ss.partial.clear();
  }
  ss.file.reset();
}

std::vector<std::string> OutputRelay::stderr_tail(int rank) const {
  auto it = ranks_.find(rank);
  if (it == ranks_.end()) return {};
  return {it->second.tail.begin(), it->second.tail.end()};
}

}  // namespace fastrun::launcher
