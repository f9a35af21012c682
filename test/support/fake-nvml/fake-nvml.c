/*
 * A stand-in for libnvidia-ml.so.1 with the symbols Sigil's NVML binding calls and the structure layouts of
 * NVIDIA's nvml.h, so the FFI path really runs in tests. It returns a recorded report and certificate chain
 * (fakeNvmlConfigure) for every device, and keeps the nonce it was last asked for (fakeNvmlLastNonce).
 * Built by the tests: gcc -shared -fPIC -o libnvidia-ml.so.1 fake-nvml.c
 */
#include <stdio.h>
#include <string.h>

typedef int nvmlReturn_t;
#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_INSUFFICIENT_SIZE 7

typedef struct nvmlDevice_st { unsigned int index; } *nvmlDevice_t;

typedef struct {
  unsigned int environment;
  unsigned int ccFeature;
  unsigned int devToolsMode;
} nvmlConfComputeSystemState_t;

typedef struct {
  unsigned int isCecAttestationReportPresent;
  unsigned int attestationReportSize;
  unsigned int cecAttestationReportSize;
  unsigned char nonce[32];
  unsigned char attestationReport[8192];
  unsigned char cecAttestationReport[4096];
} nvmlConfComputeGpuAttestationReport_t;

typedef struct {
  unsigned int certChainSize;
  unsigned int attestationCertChainSize;
  unsigned char certChain[4096];
  unsigned char attestationCertChain[5120];
} nvmlConfComputeGpuCertificate_t;

static struct nvmlDevice_st devices[8];
static unsigned int device_count = 0;
static unsigned int cc_feature = 0;
static unsigned int initialized = 0;
static unsigned char report[8192];
static unsigned int report_size = 0;
static unsigned char certs[5120];
static unsigned int certs_size = 0;
static unsigned char last_nonce[32];

static unsigned int read_file(const char *path, unsigned char *into, unsigned int max) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return 0;
  size_t n = fread(into, 1, max, f);
  fclose(f);
  return (unsigned int)n;
}

/* Test control: what every device answers. Returns 0 when both files were read. */
int fakeNvmlConfigure(const char *report_path, const char *certs_path, unsigned int gpus, unsigned int cc) {
  report_size = read_file(report_path, report, sizeof report);
  certs_size = read_file(certs_path, certs, sizeof certs);
  device_count = gpus > 8 ? 8 : gpus;
  cc_feature = cc;
  for (unsigned int i = 0; i < 8; i++) devices[i].index = i;
  return report_size > 0 && certs_size > 0 ? 0 : -1;
}

void fakeNvmlLastNonce(unsigned char *out) { memcpy(out, last_nonce, 32); }

nvmlReturn_t nvmlInit_v2(void) { initialized = 1; return NVML_SUCCESS; }

nvmlReturn_t nvmlShutdown(void) { initialized = 0; return NVML_SUCCESS; }

const char *nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    default: return "Unknown Error";
  }
}

nvmlReturn_t nvmlSystemGetConfComputeState(nvmlConfComputeSystemState_t *state) {
  if (!initialized) return NVML_ERROR_UNINITIALIZED;
  state->environment = cc_feature ? 2 : 0;
  state->ccFeature = cc_feature;
  state->devToolsMode = 0;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
  if (!initialized) return NVML_ERROR_UNINITIALIZED;
  *count = device_count;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
  if (!initialized) return NVML_ERROR_UNINITIALIZED;
  if (index >= device_count) return NVML_ERROR_INVALID_ARGUMENT;
  *device = &devices[index];
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, unsigned int *arch) {
  if (device == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  *arch = 9; /* NVML_DEVICE_ARCH_HOPPER */
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetConfComputeGpuAttestationReport(nvmlDevice_t device, nvmlConfComputeGpuAttestationReport_t *out) {
  if (device == NULL || out == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  if (!cc_feature) return NVML_ERROR_NOT_SUPPORTED;
  memcpy(last_nonce, out->nonce, 32);
  memcpy(out->attestationReport, report, report_size);
  out->attestationReportSize = report_size;
  out->isCecAttestationReportPresent = 0;
  out->cecAttestationReportSize = 0;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetConfComputeGpuCertificate(nvmlDevice_t device, nvmlConfComputeGpuCertificate_t *out) {
  if (device == NULL || out == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  if (!cc_feature) return NVML_ERROR_NOT_SUPPORTED;
  out->certChainSize = 0;
  memcpy(out->attestationCertChain, certs, certs_size);
  out->attestationCertChainSize = certs_size;
  return NVML_SUCCESS;
}
