// Issue 22 research: a timeline of a CUDA program without Nsight Systems (not usable on the GPU
// machine). Preloaded into any program (LD_PRELOAD), it records through CUPTI's activity API every
// kernel, copy and memset (device start and end, stream) and every runtime API call (host start and
// end, thread), all on CUPTI's one clock, and writes them at exit as CSV to $CUPTI_TRACE (default
// cupti_trace.csv): kind,name,start_ns,end_ns,stream,bytes,correlation (for a kernel, "bytes" holds
// its grid's blocks; for a runtime call, "stream" its thread; "correlation" ties a call to its work).
// build: g++ -O2 -shared -fPIC -I$CUDA/include cupti_trace.cpp -o libcupti_trace.so -L<dir> -lcupti
#include <cupti.h>
#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

namespace
{

struct Row
{
  const char* kind;
  std::string name;
  unsigned long long start, end;
  unsigned stream;
  unsigned long long bytes;
  unsigned correlation;
};

std::mutex gMutex;
std::vector<Row>* gRows = nullptr;
constexpr size_t kBuffer = 8 << 20;

void CUPTIAPI requested(uint8_t** buffer, size_t* size, size_t* maxRecords)
{
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBuffer));
  *size = kBuffer;
  *maxRecords = 0;
}

const char* copyKind(int kind)
{
  switch (kind)
  {
  case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
    return "memcpy_htod";
  case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
    return "memcpy_dtoh";
  case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
    return "memcpy_dtod";
  default:
    return "memcpy_other";
  }
}

void CUPTIAPI completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid)
{
  CUpti_Activity* record = nullptr;
  std::lock_guard<std::mutex> lock(gMutex);
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS)
  {
    switch (record->kind)
    {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL:
    {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      const unsigned long long blocks = 1ull * k->gridX * k->gridY * k->gridZ;
      gRows->push_back({"kernel", k->name ? k->name : "?", k->start, k->end, k->streamId, blocks, k->correlationId});
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY:
    {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      gRows->push_back({copyKind(m->copyKind), "", m->start, m->end, m->streamId, m->bytes, m->correlationId});
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET:
    {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      gRows->push_back({"memset", "", m->start, m->end, m->streamId, m->bytes, m->correlationId});
      break;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    {
      const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(record);
      const char* name = nullptr;
      cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, a->cbid, &name);
      gRows->push_back({"api", name ? name : "?", a->start, a->end, a->threadId, 0, a->correlationId});
      break;
    }
    default:
      break;
    }
  }
  std::free(buffer);
}

struct Tracer
{
  Tracer()
  {
    gRows = new std::vector<Row>();
    gRows->reserve(1 << 20);
    cuptiActivityRegisterCallbacks(requested, completed);
    for (CUpti_ActivityKind kind : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                    CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_RUNTIME})
      if (cuptiActivityEnable(kind) != CUPTI_SUCCESS)
        std::fprintf(stderr, "cupti_trace: could not enable activity kind %d\n", int(kind));
  }
  ~Tracer()
  {
    cuptiActivityFlushAll(1);
    const char* path = std::getenv("CUPTI_TRACE");
    FILE* out = std::fopen(path ? path : "cupti_trace.csv", "w");
    if (!out)
      return;
    std::fprintf(out, "kind,name,start_ns,end_ns,stream,bytes,correlation\n");
    std::lock_guard<std::mutex> lock(gMutex);
    for (const Row& r : *gRows)
    {
      // A kernel's name demangled, without its parameters, its last 60 characters.
      std::string name = r.name;
      int status = 0;
      if (char* plain = abi::__cxa_demangle(r.name.c_str(), nullptr, nullptr, &status))
      {
        name = plain;
        std::free(plain);
      }
      if (const size_t paren = name.find('('); paren != std::string::npos && paren > 0)
        name = name.substr(0, paren);
      if (name.size() > 60)
        name = name.substr(name.size() - 60);
      for (char& c : name)
        if (c == ',')
          c = ';';
      std::fprintf(out, "%s,%s,%llu,%llu,%u,%llu,%u\n", r.kind, name.c_str(), r.start, r.end, r.stream, r.bytes,
                   r.correlation);
    }
    std::fclose(out);
  }
};

Tracer gTracer;

}  // namespace
