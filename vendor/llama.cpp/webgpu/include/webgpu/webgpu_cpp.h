// Strata's stand-in for the webgpu C++ API, for emscripten older than 4.0.10 (which lacks the
// emdawnwebgpu port). Only what ggml-webgpu.cpp uses, written from its calls: each object is an
// integer handle into a table of WebGPU JS objects kept by library_strata_webgpu.js, which also
// implements every swgpu_* function below. Asynchronous results (adapter, device, map, queue
// done) are futures that Instance::WaitAny blocks on with ASYNCIFY (the only suspending import
// is swgpu_wait); their callbacks run inside WaitAny, never spontaneously.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

extern "C" {
void     swgpu_addref(uint32_t h);
void     swgpu_release(uint32_t h);
uint32_t swgpu_instance_create(void);
int      swgpu_has_wgsl_feature(const char * name);
uint32_t swgpu_request_adapter(void);
int      swgpu_adapter_has_feature(uint32_t adapter, const char * name);
double   swgpu_adapter_limit(uint32_t adapter, const char * name);
char *   swgpu_adapter_info(uint32_t adapter, const char * field);  // malloc'd, caller frees
uint32_t swgpu_request_device(uint32_t adapter, const char * features, const char * limits);
char *   swgpu_device_poll_error(uint32_t device, int * kind);  // malloc'd message or null
uint32_t swgpu_device_queue(uint32_t device);
uint32_t swgpu_create_buffer(uint32_t device, const char * label, size_t label_len, double size, uint32_t usage,
                             int mapped);
uint32_t swgpu_create_shader_module(uint32_t device, const char * code, size_t code_len);
uint32_t swgpu_create_compute_pipeline(uint32_t device, const char * label, size_t label_len, uint32_t module,
                                       const char * entry, size_t entry_len, const void * constants, size_t n);
uint32_t swgpu_pipeline_bind_group_layout(uint32_t pipeline, uint32_t index);
uint32_t swgpu_create_bind_group(uint32_t device, uint32_t layout, const void * entries, size_t n);
uint32_t swgpu_create_command_encoder(uint32_t device);
uint32_t swgpu_begin_compute_pass(uint32_t encoder);
void     swgpu_copy_buffer_to_buffer(uint32_t encoder, uint32_t src, double src_off, uint32_t dst, double dst_off,
                                     double size);
uint32_t swgpu_encoder_finish(uint32_t encoder);
void     swgpu_pass_set_pipeline(uint32_t pass, uint32_t pipeline);
void     swgpu_pass_set_bind_group(uint32_t pass, uint32_t index, uint32_t group);
void     swgpu_pass_dispatch(uint32_t pass, uint32_t x, uint32_t y, uint32_t z);
void     swgpu_pass_end(uint32_t pass);
void     swgpu_queue_submit(uint32_t queue, const uint32_t * buffers, size_t n);
void     swgpu_queue_write_buffer(uint32_t queue, uint32_t buffer, double offset, const void * data, double size);
uint32_t swgpu_queue_work_done(uint32_t queue);
double   swgpu_buffer_size(uint32_t buffer);
void     swgpu_buffer_destroy(uint32_t buffer);
uint32_t swgpu_buffer_map(uint32_t buffer, uint32_t mode, double offset, double size);
void *   swgpu_buffer_mapped_range(uint32_t buffer, double offset, double size);  // a copy in the heap
void     swgpu_buffer_unmap(uint32_t buffer);
// Blocks (ASYNCIFY) until the future settles; WaitStatus, plus the callback's status, object and message.
int      swgpu_wait(uint32_t future, double timeout_ms, int * status, uint32_t * object, char ** message);
}

#define WGPU_STRLEN          SIZE_MAX
#define WGPU_WHOLE_SIZE      UINT64_MAX
#define WGPU_WHOLE_MAP_SIZE  SIZE_MAX
#define WGPU_LIMIT_U32_UNDEFINED UINT32_MAX
#define WGPU_LIMIT_U64_UNDEFINED UINT64_MAX

namespace wgpu {

struct StringView {
    const char * data   = nullptr;
    size_t       length = WGPU_STRLEN;

    StringView() = default;
    StringView(const char * s) : data(s), length(s ? strlen(s) : 0) {}
    StringView(const char * s, size_t n) : data(s), length(n) {}
    StringView(std::string_view s) : data(s.data()), length(s.size()) {}

    operator std::string_view() const {
        if (!data) return {};
        return length == WGPU_STRLEN ? std::string_view(data) : std::string_view(data, length);
    }
};

enum class WaitStatus : uint32_t { Success = 1, TimedOut = 2, Error = 3 };
enum class CallbackMode : uint32_t { WaitAnyOnly = 1, AllowProcessEvents = 2, AllowSpontaneous = 3 };
enum class RequestAdapterStatus : uint32_t { Success = 1, CallbackCancelled = 2, Unavailable = 3, Error = 4 };
enum class RequestDeviceStatus : uint32_t { Success = 1, CallbackCancelled = 2, Error = 3 };
enum class MapAsyncStatus : uint32_t { Success = 1, CallbackCancelled = 2, Error = 3, Aborted = 4 };
enum class QueueWorkDoneStatus : uint32_t { Success = 1, CallbackCancelled = 2, Error = 3 };
enum class DeviceLostReason : uint32_t { Unknown = 1, Destroyed = 2, CallbackCancelled = 3, FailedCreation = 4 };
enum class ErrorType : uint32_t { NoError = 1, Validation = 2, OutOfMemory = 3, Internal = 4, Unknown = 5 };
enum class InstanceFeatureName : uint32_t { TimedWaitAny = 1, ShaderSourceSPIRV = 2, MultipleDevicesPerAdapter = 3 };
enum class WGSLLanguageFeatureName : uint32_t { Packed4x8IntegerDotProduct = 2 };
enum class FeatureName : uint32_t { ShaderF16 = 1, Subgroups = 2, TimestampQuery = 3 };
enum class SType : uint32_t { ShaderSourceWGSL = 2 };

// Same bit values as the JS GPUBufferUsage / GPUMapMode flags, passed through unchanged.
enum class BufferUsage : uint64_t {
    None = 0, MapRead = 0x1, MapWrite = 0x2, CopySrc = 0x4, CopyDst = 0x8, Index = 0x10, Vertex = 0x20,
    Uniform = 0x40, Storage = 0x80, Indirect = 0x100, QueryResolve = 0x200,
};
enum class MapMode : uint64_t { None = 0, Read = 0x1, Write = 0x2 };

inline BufferUsage operator|(BufferUsage a, BufferUsage b) { return BufferUsage(uint64_t(a) | uint64_t(b)); }
inline BufferUsage operator&(BufferUsage a, BufferUsage b) { return BufferUsage(uint64_t(a) & uint64_t(b)); }
inline BufferUsage & operator|=(BufferUsage & a, BufferUsage b) { return a = a | b; }
inline MapMode operator|(MapMode a, MapMode b) { return MapMode(uint64_t(a) | uint64_t(b)); }

struct Future {
    uint64_t id = 0;
};

struct ChainedStruct {
    const ChainedStruct * nextInChain = nullptr;
    SType                 sType       = SType(0);
};

namespace detail {
// Reference-counted handle: copies share the JS object, the last release drops it from the table.
template <typename T> class Handle {
  public:
    Handle() = default;
    Handle(std::nullptr_t) {}
    Handle(const Handle & o) : h_(o.h_) { if (h_) swgpu_addref(h_); }
    Handle(Handle && o) noexcept : h_(o.h_) { o.h_ = 0; }
    ~Handle() { if (h_) swgpu_release(h_); }
    Handle & operator=(const Handle & o) {
        if (o.h_) swgpu_addref(o.h_);
        if (h_) swgpu_release(h_);
        h_ = o.h_;
        return *this;
    }
    Handle & operator=(Handle && o) noexcept {
        if (this != &o) {
            if (h_) swgpu_release(h_);
            h_ = o.h_;
            o.h_ = 0;
        }
        return *this;
    }
    Handle & operator=(std::nullptr_t) {
        if (h_) swgpu_release(h_);
        h_ = 0;
        return *this;
    }
    explicit operator bool() const { return h_ != 0; }
    bool operator==(std::nullptr_t) const { return h_ == 0; }
    bool operator==(const Handle & o) const { return h_ == o.h_; }
    uint32_t Get() const { return h_; }

    static T Acquire(uint32_t h) {  // takes over a reference the JS side created
        T t;
        static_cast<Handle &>(t).h_ = h;
        return t;
    }

  protected:
    uint32_t h_ = 0;
};

// Callbacks of pending futures, run by Instance::WaitAny with (status, object handle, message).
using Completion = std::function<void(uint32_t, uint32_t, StringView)>;
inline std::unordered_map<uint64_t, Completion> & completions() {
    static std::unordered_map<uint64_t, Completion> m;
    return m;
}
inline Future pending(uint32_t id, Completion c) {
    if (id) completions()[id] = std::move(c);
    return Future{ id };
}
inline std::string take_string(char * s) {
    std::string r = s ? s : "";
    free(s);
    return r;
}
}  // namespace detail

#define SWGPU_HANDLE(Name)                 \
    class Name : public detail::Handle<Name> { \
      public:                              \
        using Handle::Handle;

SWGPU_HANDLE(ShaderModule) };
SWGPU_HANDLE(BindGroupLayout) };
SWGPU_HANDLE(BindGroup) };
SWGPU_HANDLE(PipelineLayout) };
SWGPU_HANDLE(CommandBuffer) };

SWGPU_HANDLE(ComputePipeline)
    BindGroupLayout GetBindGroupLayout(uint32_t index) const {
        return BindGroupLayout::Acquire(swgpu_pipeline_bind_group_layout(h_, index));
    }
};

SWGPU_HANDLE(Buffer)
    uint64_t GetSize() const { return (uint64_t) swgpu_buffer_size(h_); }
    void Destroy() const { swgpu_buffer_destroy(h_); }
    template <typename F>
    Future MapAsync(MapMode mode, size_t offset, size_t size, CallbackMode, F callback) const {
        return detail::pending(swgpu_buffer_map(h_, (uint32_t) mode, (double) offset, (double) size),
                               [callback](uint32_t status, uint32_t, StringView msg) {
                                   callback(MapAsyncStatus(status), msg);
                               });
    }
    const void * GetConstMappedRange(size_t offset = 0, size_t size = WGPU_WHOLE_MAP_SIZE) const {
        return swgpu_buffer_mapped_range(h_, (double) offset, size == WGPU_WHOLE_MAP_SIZE ? -1.0 : (double) size);
    }
    void Unmap() const { swgpu_buffer_unmap(h_); }
};

struct BindGroupEntry {
    const ChainedStruct * nextInChain = nullptr;
    uint32_t              binding     = 0;
    Buffer                buffer;
    uint64_t              offset = 0;
    uint64_t              size   = WGPU_WHOLE_SIZE;
};
// library_strata_webgpu.js reads entries straight from the heap at these offsets
static_assert(sizeof(void *) == 4 && offsetof(BindGroupEntry, binding) == 4 && offsetof(BindGroupEntry, buffer) == 8 &&
                  offsetof(BindGroupEntry, offset) == 16 && offsetof(BindGroupEntry, size) == 24 &&
                  sizeof(BindGroupEntry) == 32,
              "BindGroupEntry layout is shared with library_strata_webgpu.js");

struct ConstantEntry {
    const ChainedStruct * nextInChain = nullptr;
    StringView            key;
    double                value = 0;
};
static_assert(offsetof(ConstantEntry, key) == 4 && offsetof(ConstantEntry, value) == 16 && sizeof(ConstantEntry) == 24,
              "ConstantEntry layout is shared with library_strata_webgpu.js");

struct BufferDescriptor {
    const ChainedStruct * nextInChain = nullptr;
    StringView            label;
    BufferUsage           usage            = BufferUsage::None;
    uint64_t              size             = 0;
    bool                  mappedAtCreation = false;
};

struct ShaderSourceWGSL : ChainedStruct {
    ShaderSourceWGSL() { sType = SType::ShaderSourceWGSL; }
    StringView code;
};

struct ShaderModuleDescriptor {
    const ChainedStruct * nextInChain = nullptr;
    StringView            label;
};

struct ComputeState {
    const ChainedStruct * nextInChain = nullptr;
    ShaderModule          module;
    StringView            entryPoint;
    size_t                constantCount = 0;
    const ConstantEntry * constants     = nullptr;
};

struct ComputePipelineDescriptor {
    const ChainedStruct * nextInChain = nullptr;
    StringView            label;
    PipelineLayout        layout;  // null: "auto"
    ComputeState          compute;
};

struct BindGroupDescriptor {
    const ChainedStruct *  nextInChain = nullptr;
    StringView             label;
    BindGroupLayout        layout;
    size_t                 entryCount = 0;
    const BindGroupEntry * entries    = nullptr;
};

struct ComputePassDescriptor {
    const ChainedStruct * nextInChain = nullptr;
    StringView            label;
};

struct CommandEncoderDescriptor {
    const ChainedStruct * nextInChain = nullptr;
    StringView            label;
};

SWGPU_HANDLE(ComputePassEncoder)
    void SetPipeline(const ComputePipeline & p) const { swgpu_pass_set_pipeline(h_, p.Get()); }
    void SetBindGroup(uint32_t index, const BindGroup & g, size_t = 0, const uint32_t * = nullptr) const {
        swgpu_pass_set_bind_group(h_, index, g.Get());
    }
    void DispatchWorkgroups(uint32_t x, uint32_t y = 1, uint32_t z = 1) const { swgpu_pass_dispatch(h_, x, y, z); }
    void End() const { swgpu_pass_end(h_); }
};

SWGPU_HANDLE(CommandEncoder)
    ComputePassEncoder BeginComputePass(const ComputePassDescriptor * = nullptr) const {
        return ComputePassEncoder::Acquire(swgpu_begin_compute_pass(h_));
    }
    void CopyBufferToBuffer(const Buffer & src, uint64_t src_off, const Buffer & dst, uint64_t dst_off,
                            uint64_t size) const {
        swgpu_copy_buffer_to_buffer(h_, src.Get(), (double) src_off, dst.Get(), (double) dst_off, (double) size);
    }
    CommandBuffer Finish() const { return CommandBuffer::Acquire(swgpu_encoder_finish(h_)); }
};
static_assert(sizeof(CommandBuffer) == sizeof(uint32_t), "Queue::Submit passes CommandBuffer arrays as handles");

SWGPU_HANDLE(Queue)
    void Submit(size_t n, const CommandBuffer * cmds) const {
        swgpu_queue_submit(h_, reinterpret_cast<const uint32_t *>(cmds), n);
    }
    void WriteBuffer(const Buffer & b, uint64_t offset, const void * data, size_t size) const {
        swgpu_queue_write_buffer(h_, b.Get(), (double) offset, data, (double) size);
    }
    template <typename F> Future OnSubmittedWorkDone(CallbackMode, F callback) const {
        return detail::pending(swgpu_queue_work_done(h_), [callback](uint32_t status, uint32_t, StringView msg) {
            callback(QueueWorkDoneStatus(status), msg);
        });
    }
};

// The compute-relevant subset of limits, requested from the device as the adapter reports them.
#define SWGPU_LIMITS(X)                                  \
    X(uint32_t, maxBindGroups)                           \
    X(uint32_t, maxBindingsPerBindGroup)                 \
    X(uint32_t, maxStorageBuffersPerShaderStage)         \
    X(uint32_t, maxUniformBuffersPerShaderStage)         \
    X(uint64_t, maxUniformBufferBindingSize)             \
    X(uint64_t, maxStorageBufferBindingSize)             \
    X(uint32_t, minUniformBufferOffsetAlignment)         \
    X(uint32_t, minStorageBufferOffsetAlignment)         \
    X(uint64_t, maxBufferSize)                           \
    X(uint32_t, maxComputeWorkgroupStorageSize)          \
    X(uint32_t, maxComputeInvocationsPerWorkgroup)       \
    X(uint32_t, maxComputeWorkgroupSizeX)                \
    X(uint32_t, maxComputeWorkgroupSizeY)                \
    X(uint32_t, maxComputeWorkgroupSizeZ)                \
    X(uint32_t, maxComputeWorkgroupsPerDimension)

struct Limits {
    ChainedStruct * nextInChain = nullptr;
#define SWGPU_FIELD(type, name) type name = (type) -1;  // -1: undefined
    SWGPU_LIMITS(SWGPU_FIELD)
#undef SWGPU_FIELD
};

struct AdapterInfo {
    ChainedStruct * nextInChain = nullptr;
    StringView      vendor, architecture, device, description;
    uint32_t        vendorID = 0, deviceID = 0, subgroupMinSize = 0, subgroupMaxSize = 0;

    AdapterInfo() = default;
    AdapterInfo(const AdapterInfo &) = delete;  // the views point into strings_
    AdapterInfo & operator=(const AdapterInfo &) = delete;
    std::string strings_[4];
};

struct RequestAdapterOptions {
    const ChainedStruct * nextInChain = nullptr;
};

class Device;

struct DeviceDescriptor {
    const ChainedStruct * nextInChain = nullptr;
    StringView            label;
    size_t                requiredFeatureCount = 0;
    const FeatureName *   requiredFeatures     = nullptr;
    const Limits *        requiredLimits       = nullptr;

    using LostCallback  = std::function<void(const Device &, DeviceLostReason, StringView)>;
    using ErrorCallback = std::function<void(const Device &, ErrorType, StringView)>;
    template <typename F> void SetDeviceLostCallback(CallbackMode, F f) { lost = f; }
    template <typename F> void SetUncapturedErrorCallback(F f) { error = f; }
    LostCallback  lost;
    ErrorCallback error;
};

SWGPU_HANDLE(Device)
    Buffer CreateBuffer(const BufferDescriptor * d) const {
        std::string_view label = d->label;
        return Buffer::Acquire(swgpu_create_buffer(h_, label.data(), label.size(), (double) d->size,
                                                   (uint32_t) d->usage, d->mappedAtCreation));
    }
    ShaderModule CreateShaderModule(const ShaderModuleDescriptor * d) const {
        for (const ChainedStruct * c = d->nextInChain; c; c = c->nextInChain) {
            if (c->sType == SType::ShaderSourceWGSL) {
                std::string_view code = static_cast<const ShaderSourceWGSL *>(c)->code;
                return ShaderModule::Acquire(swgpu_create_shader_module(h_, code.data(), code.size()));
            }
        }
        return nullptr;
    }
    ComputePipeline CreateComputePipeline(const ComputePipelineDescriptor * d) const {
        std::string_view label = d->label, entry = d->compute.entryPoint;
        return ComputePipeline::Acquire(swgpu_create_compute_pipeline(h_, label.data(), label.size(),
                                                                      d->compute.module.Get(), entry.data(),
                                                                      entry.size(), d->compute.constants,
                                                                      d->compute.constantCount));
    }
    BindGroup CreateBindGroup(const BindGroupDescriptor * d) const {
        return BindGroup::Acquire(swgpu_create_bind_group(h_, d->layout.Get(), d->entries, d->entryCount));
    }
    CommandEncoder CreateCommandEncoder(const CommandEncoderDescriptor * = nullptr) const {
        return CommandEncoder::Acquire(swgpu_create_command_encoder(h_));
    }
    Queue GetQueue() const { return Queue::Acquire(swgpu_device_queue(h_)); }
};

namespace detail {
struct DeviceCallbacks {
    Device                           device;
    DeviceDescriptor::LostCallback  lost;
    DeviceDescriptor::ErrorCallback error;
};
inline std::vector<DeviceCallbacks> & device_callbacks() {
    static std::vector<DeviceCallbacks> v;
    return v;
}
// WebGPU reports errors and loss as JS events; they are collected there and delivered after each wait.
inline void poll_device_errors() {
    for (size_t i = 0; i < device_callbacks().size(); i++) {
        DeviceCallbacks & d = device_callbacks()[i];
        int kind = 0;
        while (char * m = swgpu_device_poll_error(d.device.Get(), &kind)) {
            const std::string msg = take_string(m);
            if (kind >= 100) {  // lost: 100 + reason
                if (d.lost) d.lost(d.device, DeviceLostReason(kind - 100), StringView(msg));
            } else if (d.error) {
                d.error(d.device, ErrorType(kind), StringView(msg));
            }
        }
    }
}
}  // namespace detail

SWGPU_HANDLE(Adapter)
    void GetLimits(Limits * l) const {
#define SWGPU_GET(type, name)                                  \
    {                                                          \
        const double v = swgpu_adapter_limit(h_, #name);       \
        if (v == v) l->name = (type) v; /* NaN: not reported */ \
    }
        SWGPU_LIMITS(SWGPU_GET)
#undef SWGPU_GET
    }
    void GetInfo(AdapterInfo * info) const {
        const char * fields[4] = { "vendor", "architecture", "device", "description" };
        StringView * views[4]  = { &info->vendor, &info->architecture, &info->device, &info->description };
        for (int i = 0; i < 4; i++) {
            info->strings_[i] = detail::take_string(swgpu_adapter_info(h_, fields[i]));
            *views[i]         = StringView(info->strings_[i]);
        }
        info->subgroupMinSize = (uint32_t) atoi(detail::take_string(swgpu_adapter_info(h_, "subgroupMinSize")).c_str());
        info->subgroupMaxSize = (uint32_t) atoi(detail::take_string(swgpu_adapter_info(h_, "subgroupMaxSize")).c_str());
    }
    static const char * FeatureString(FeatureName f) {
        switch (f) {
            case FeatureName::ShaderF16:      return "shader-f16";
            case FeatureName::Subgroups:      return "subgroups";
            case FeatureName::TimestampQuery: return "timestamp-query";
        }
        return "";
    }
    bool HasFeature(FeatureName f) const { return swgpu_adapter_has_feature(h_, FeatureString(f)) != 0; }
    template <typename F> Future RequestDevice(const DeviceDescriptor * d, CallbackMode, F callback) const {
        std::string features, limits;
        for (size_t i = 0; i < d->requiredFeatureCount; i++) {
            features += std::string(features.empty() ? "" : ",") + FeatureString(d->requiredFeatures[i]);
        }
        if (d->requiredLimits) {
#define SWGPU_PUT(type, name)                                                                       \
    if (d->requiredLimits->name != (type) -1) {                                                     \
        limits += std::string(limits.empty() ? "" : ",") + #name "=" +                              \
                  std::to_string((unsigned long long) d->requiredLimits->name);                     \
    }
            SWGPU_LIMITS(SWGPU_PUT)
#undef SWGPU_PUT
        }
        auto lost  = d->lost;
        auto error = d->error;
        return detail::pending(swgpu_request_device(h_, features.c_str(), limits.c_str()),
                               [callback, lost, error](uint32_t status, uint32_t obj, StringView msg) {
                                   Device device = Device::Acquire(obj);
                                   if (device) detail::device_callbacks().push_back({ device, lost, error });
                                   callback(RequestDeviceStatus(status), std::move(device), msg);
                               });
    }
};

struct InstanceDescriptor {
    const ChainedStruct *       nextInChain          = nullptr;
    size_t                      requiredFeatureCount = 0;
    const InstanceFeatureName * requiredFeatures     = nullptr;
};

SWGPU_HANDLE(Instance)
    template <typename F> Future RequestAdapter(const RequestAdapterOptions *, CallbackMode, F callback) const {
        return detail::pending(swgpu_request_adapter(), [callback](uint32_t status, uint32_t obj, StringView msg) {
            callback(RequestAdapterStatus(status), Adapter::Acquire(obj), msg);
        });
    }
    bool HasWGSLLanguageFeature(WGSLLanguageFeatureName f) const {
        return f == WGSLLanguageFeatureName::Packed4x8IntegerDotProduct &&
               swgpu_has_wgsl_feature("packed_4x8_integer_dot_product");
    }
    // Runs the future's callback once it settled (timeout in ns, UINT64_MAX: none).
    WaitStatus WaitAny(Future f, uint64_t timeout) const {
        int      status = 0;
        uint32_t obj    = 0;
        char *   msg    = nullptr;
        const double ms = timeout == UINT64_MAX ? -1.0 : (double) timeout / 1e6;
        const auto   ws = WaitStatus(swgpu_wait((uint32_t) f.id, ms, &status, &obj, &msg));
        const std::string message = detail::take_string(msg);
        if (ws == WaitStatus::Success) {
            auto it = detail::completions().find(f.id);
            if (it != detail::completions().end()) {
                detail::Completion c = std::move(it->second);
                detail::completions().erase(it);
                c((uint32_t) status, obj, StringView(message));
            } else if (obj) {
                swgpu_release(obj);
            }
        }
        detail::poll_device_errors();
        return ws;
    }
};

#undef SWGPU_HANDLE

inline Instance CreateInstance(const InstanceDescriptor * = nullptr) {
    return Instance::Acquire(swgpu_instance_create());
}

}  // namespace wgpu
