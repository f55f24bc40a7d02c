// host_shm / connect_shm: creating, opening and removing the segment of a shm:// store.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include <boost/interprocess/exceptions.hpp>
#include <boost/interprocess/mapped_region.hpp>
#include <boost/interprocess/shared_memory_object.hpp>
#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/os/poll_until.h"
#include "fastrun/runtime/os/unique_fd.h"
#include "fastrun/runtime/store/kinds.h"
#include "fastrun/runtime/store/owner.h"
#include "fastrun/runtime/store/shm/segment_layout.h"
#include "fastrun/runtime/store/shm/shm_store.h"

namespace bip = boost::interprocess;

namespace fastrun::store_kinds {
namespace {

using shm_store::Mapping;
using shm_store::SegmentHeader;

std::string segment_name(const StoreAddress& a) { return shm_store::kSegmentPrefix + a.name; }

// A close-on-exec copy of the segment's fd for Mapping::fd (Boost closes its own with `shm`).
os::UniqueFd dup_fd(const bip::shared_memory_object& shm, const std::string& address, const std::string& name) {
  os::UniqueFd fd(::fcntl(shm.get_mapping_handle().handle, F_DUPFD_CLOEXEC, 0));
  if (!fd)
    throw StoreError(
        fmt::format("{}: cannot duplicate the fd of /dev/shm/{}: {}", address, name, std::strerror(errno)));
  return fd;
}

void copy_text(char* dst, std::size_t n, const std::string& s) {
  std::memset(dst, 0, n);
  std::memcpy(dst, s.data(), std::min(n - 1, s.size()));
}

// Owns the segment: unlinks it when destroyed (clients already mapped keep working).
class HostedShm final : public HostedStore {
 public:
  HostedShm(const StoreAddress& a, const StoreOptions& o) : address_(a.to_string()), name_(segment_name(a)) {
    if (o.shm_bytes < shm_store::kMinSegmentBytes)
      throw ConfigError(fmt::format("{}: segment size {} bytes is below the minimum {} (FASTRUN_SHM_STORE_BYTES)",
                                    address_, o.shm_bytes, shm_store::kMinSegmentBytes));
    timeout_ = o.timeout;
    bip::shared_memory_object shm;
    try {
      shm = bip::shared_memory_object(bip::create_only, name_.c_str(), bip::read_write, bip::permissions(0600));
    } catch (const bip::interprocess_exception& e) {
      if (e.get_error_code() == bip::already_exists_error)
        throw StoreError(fmt::format("{}: segment /dev/shm/{} already exists: another job uses this name, or a crashed "
                                     "job left it (remove stale ones with `fastrun --cleanup`)",
                                     address_, name_));
      throw StoreError(fmt::format("{}: cannot create segment /dev/shm/{}: {}", address_, name_, e.what()));
    }
    created_ = true;
    try {
      // Owner-only, whatever the umask or Boost version did.
      if (::fchmod(shm.get_mapping_handle().handle, 0600) != 0) throw_errno("fchmod /dev/shm/" + name_, errno);
      shm.truncate(static_cast<bip::offset_t>(o.shm_bytes));
      // Reserve what creation touches now, the heaps as they fill (segment_layout.h): a /dev/shm
      // too small (Docker's default is 64 MiB) is a clear StoreError, never a SIGBUS in a write.
      shm_store::reserve_initial(shm.get_mapping_handle().handle, o.shm_bytes, o.shm_min_keys, address_,
                                 "/dev/shm/" + name_);
      mapping_ = std::make_shared<Mapping>();
      mapping_->address = address_;
      mapping_->segment = "/dev/shm/" + name_;
      mapping_->fd = dup_fd(shm, address_, name_);
      try {
        mapping_->region = std::make_unique<bip::mapped_region>(shm, bip::read_write);
      } catch (const bip::interprocess_exception& e) {
        // Boost's own exception would reach the user as a bare "Cannot allocate memory".
        throw StoreError(fmt::format("{}: cannot map the {}-byte segment /dev/shm/{}: {} (lower "
                                     "FASTRUN_SHM_STORE_BYTES; the default is 64 MiB)",
                                     address_, o.shm_bytes, name_, e.what()));
      }
      auto* base = mapping_->region->get_address();
      // The creator block first (cleanup reads it), then the layout, then the magic.
      auto* h = static_cast<SegmentHeader*>(base);
      const auto me = store_owner::self();
      h->creator.pid = me.pid;
      h->creator.start_time = me.start_time;
      h->creator.uid = ::geteuid();
      copy_text(h->creator.boot_id, sizeof h->creator.boot_id, me.boot_id);
      copy_text(h->creator.host, sizeof h->creator.host, me.host);
      h->creator.ident_magic = shm_store::kIdentMagic;
      const shm_store::Creator creator = h->creator;
      shm_store::initialize_segment(base, o.shm_bytes, o.shm_min_keys, address_);
      h->creator = creator;
      mapping_->header = h;
    } catch (...) {
      bip::shared_memory_object::remove(name_.c_str());
      throw;
    }
  }
  ~HostedShm() override {
    if (created_) bip::shared_memory_object::remove(name_.c_str());
  }
  std::string address() const override { return address_; }
  std::string token() const override { return ""; }
  std::unique_ptr<Store> connect() override {
    auto s = std::make_unique<shm_store::ShmStore>(mapping_);
    s->set_timeout(timeout_);
    return s;
  }

 private:
  std::string address_;
  std::string name_;
  bool created_ = false;
  Duration timeout_;
  std::shared_ptr<Mapping> mapping_;
};

}  // namespace

std::unique_ptr<HostedStore> host_shm(const StoreAddress& address, const StoreOptions& options) {
  return std::make_unique<HostedShm>(address, options);
}

// Opens a segment someone else hosts. Ranks may start before the host has created it, so a
// missing or not yet initialized segment is retried with backoff until options.timeout.
std::unique_ptr<Store> connect_shm(const StoreAddress& address, const StoreOptions& options) {
  const std::string name = segment_name(address);
  const std::string addr = address.to_string();
  constexpr os::Backoff kBackoff{std::chrono::microseconds(200), std::chrono::microseconds(20000)};
  std::unique_ptr<Store> store;
  std::string last_error;
  const bool opened = os::poll_until(std::chrono::steady_clock::now() + options.timeout, kBackoff, [&] {
    try {
      bip::shared_memory_object shm(bip::open_only, name.c_str(), bip::read_write);
      bip::offset_t size = 0;
      if (shm.get_size(size) && static_cast<std::uint64_t>(size) >= sizeof(SegmentHeader)) {
        auto region = std::make_unique<bip::mapped_region>(shm, bip::read_write);
        auto* h = static_cast<SegmentHeader*>(region->get_address());
        if (h->magic.load(std::memory_order_acquire) == shm_store::kMagic) {
          if (h->version != shm_store::kVersion || h->total_bytes != static_cast<std::uint64_t>(size))
            throw StoreError(fmt::format("{}: segment /dev/shm/{} has version {} / size {} (expected version {}, "
                                         "size {}): not a store of this fastrun build",
                                         addr, name, h->version, h->total_bytes, shm_store::kVersion, size));
          auto m = std::make_shared<Mapping>();
          m->address = addr;
          m->segment = "/dev/shm/" + name;
          m->region = std::move(region);
          m->header = h;
          m->fd = dup_fd(shm, addr, name);
          store = std::make_unique<shm_store::ShmStore>(std::move(m));
          store->set_timeout(options.timeout);
          return true;
        }
        last_error = "segment exists but is not initialized yet";
      } else {
        last_error = "segment exists but is not sized yet";
      }
    } catch (const bip::interprocess_exception& e) {
      last_error = e.what();
      if (e.get_error_code() != bip::not_found_error)
        throw StoreError(fmt::format("{}: cannot open segment /dev/shm/{}: {}", addr, name, e.what()));
    }
    return false;
  });
  if (!opened)
    throw TimeoutError(fmt::format("{}: segment /dev/shm/{} did not become available within {:.3g} s ({}); is the "
                                   "store hosted on this node? (raise FASTRUN_TIMEOUT to wait longer)",
                                   addr, name, options.timeout.count() / 1000.0, last_error));
  return store;
}

bool shm_exists(const StoreAddress& address) {
  return bool(os::UniqueFd(::shm_open(("/" + segment_name(address)).c_str(), O_RDONLY | O_CLOEXEC, 0)));
}

}  // namespace fastrun::store_kinds
