#pragma once
// The per-kind entry points the factory (factory.cpp) dispatches to. Each kind's folder
// implements its pair: store/shm/, store/file/, store/tcp/, store/c10d/.
#include <memory>

#include "fastrun/runtime/store/factory.h"

namespace fastrun::store_kinds {

std::unique_ptr<HostedStore> host_shm(const StoreAddress& address, const StoreOptions& options);
std::unique_ptr<Store> connect_shm(const StoreAddress& address, const StoreOptions& options);
bool shm_exists(const StoreAddress& address);  // the segment is there (not whether it is ready)

std::unique_ptr<HostedStore> host_file(const StoreAddress& address, const StoreOptions& options);
std::unique_ptr<Store> connect_file(const StoreAddress& address, const StoreOptions& options);
bool file_exists(const StoreAddress& address);  // the directory's owner marker is there (ready)

std::unique_ptr<HostedStore> host_tcp(const StoreAddress& address, const StoreOptions& options);
std::unique_ptr<Store> connect_tcp(const StoreAddress& address, const StoreOptions& options);

std::unique_ptr<HostedStore> host_c10d(const StoreAddress& address, const StoreOptions& options);  // ConfigError
std::unique_ptr<Store> connect_c10d(const StoreAddress& address, const StoreOptions& options);

}  // namespace fastrun::store_kinds
