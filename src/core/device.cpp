#include <array>
#include <mutex>
#include <sys/stat.h>

#include "core/cuda_check.h"

namespace fp8dsa {
namespace {

constexpr int kMaxDevices = 64;

struct DeviceInfo {
  Status status;
  int sm_count = 0;
};

const DeviceInfo& current_device_info() {
  static std::array<DeviceInfo, kMaxDevices> infos;
  static std::array<std::once_flag, kMaxDevices> once;
  static DeviceInfo no_device{{StatusCode::kNoDevice, "no CUDA device is available"}, 0};
  static DeviceInfo broken{};
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error
    if (counts_as_no_device(err, nvidia_kernel_driver_loaded())) return no_device;
    static std::once_flag broken_once;
    std::call_once(broken_once, [err] { broken.status = cuda_status(err, "cudaGetDeviceCount (a GPU seems present)"); });
    return broken;
  }
  if (count == 0) return no_device;
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kMaxDevices) return no_device;
  std::call_once(once[dev], [dev] {
    cudaDeviceProp prop{};
    DeviceInfo& info = infos[dev];
    cudaError_t err = cudaGetDeviceProperties(&prop, dev);
    if (err != cudaSuccess) {
      info.status = cuda_status(err, "cudaGetDeviceProperties");
      return;
    }
    info.sm_count = prop.multiProcessorCount;
    if (prop.major != 9 || prop.minor != 0) {
      info.status = {StatusCode::kUnsupportedDevice,
                     std::string("fp8dsa kernels need an sm_90 (Hopper) GPU; device ") +
                         std::to_string(dev) + " (" + prop.name + ") is sm_" +
                         std::to_string(prop.major) + std::to_string(prop.minor)};
    }
  });
  return infos[dev];
}

}  // namespace

bool counts_as_no_device(cudaError_t err, bool nvidia_driver_loaded) {
  return err == cudaErrorNoDevice || (err == cudaErrorInsufficientDriver && !nvidia_driver_loaded);
}

bool nvidia_kernel_driver_loaded() {
  struct stat st{};
  return stat("/proc/driver/nvidia/version", &st) == 0;
}

Status check_device() { return current_device_info().status; }

int device_sm_count() { return current_device_info().sm_count; }

}  // namespace fp8dsa
