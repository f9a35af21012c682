/*
 * A stand-in for the two libc calls Sigil makes on /dev/sev-guest (open, ioctl) and close, answering
 * SNP_GET_DERIVED_KEY like the AMD firmware would, so the production path (koffi -> open/ioctl with the kernel's
 * structure layouts) really runs in tests. The structures and the ioctl number come from the kernel's own uapi
 * header, so a layout mistake in Sigil fails here as it would on hardware.
 *
 * The "device" is a text file the tests write, one "name hex" per line: vcek, vmrk (the chip's root keys),
 * measurement, policy, image_id, family_id, guest_svn, tcb (the guest's launch values). The derived key mixes the
 * root key with the fields the request selects. The mixing is NOT the firmware's KDF (which is secret to the chip):
 * it only has to be deterministic and different when any selected input differs.
 * Built by the tests: gcc -shared -fPIC -o libfake-sev-guest.so fake-sev-guest.c
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/ioctl.h>
#include <linux/sev-guest.h>

#define FD_BASE 7000
#define MAX_OPEN 8
#define STATUS_INVALID_PARAM 0x16
#define STATUS_INVALID_KEY 0x27

struct guest {
  int used;
  unsigned char vcek[32], vmrk[32];
  int has_vmrk;
  unsigned char measurement[48], image_id[16], family_id[16];
  uint64_t policy, tcb;
  uint32_t guest_svn;
};

static struct guest guests[MAX_OPEN];
static uint64_t last_field_select = 0;
static uint32_t last_root_key_select = 0xffffffff;
static unsigned int derive_calls = 0;

static int hex(const char *text, unsigned char *out, size_t len) {
  if (strlen(text) != len * 2) return -1;
  for (size_t i = 0; i < len; i++) {
    unsigned int byte;
    if (sscanf(text + 2 * i, "%2x", &byte) != 1) return -1;
    out[i] = (unsigned char)byte;
  }
  return 0;
}

int open(const char *path, int flags, ...) {
  (void)flags;
  int slot = -1;
  for (int i = 0; i < MAX_OPEN; i++) if (!guests[i].used) { slot = i; break; }
  if (slot < 0) { errno = EMFILE; return -1; }
  FILE *f = fopen(path, "r");
  if (f == NULL) return -1; /* errno from fopen: ENOENT, EACCES, ... */
  struct guest g;
  memset(&g, 0, sizeof g);
  char name[32], value[256];
  int ok = 1;
  while (fscanf(f, "%31s %255s", name, value) == 2) {
    if (strcmp(name, "vcek") == 0) ok &= hex(value, g.vcek, 32) == 0;
    else if (strcmp(name, "vmrk") == 0) { ok &= hex(value, g.vmrk, 32) == 0; g.has_vmrk = 1; }
    else if (strcmp(name, "measurement") == 0) ok &= hex(value, g.measurement, 48) == 0;
    else if (strcmp(name, "image_id") == 0) ok &= hex(value, g.image_id, 16) == 0;
    else if (strcmp(name, "family_id") == 0) ok &= hex(value, g.family_id, 16) == 0;
    else if (strcmp(name, "policy") == 0) g.policy = strtoull(value, NULL, 16);
    else if (strcmp(name, "tcb") == 0) g.tcb = strtoull(value, NULL, 16);
    else if (strcmp(name, "guest_svn") == 0) g.guest_svn = (uint32_t)strtoul(value, NULL, 10);
  }
  fclose(f);
  if (!ok) { errno = ENODEV; return -1; } /* not a stand-in device file */
  g.used = 1;
  guests[slot] = g;
  return FD_BASE + slot;
}

int close(int fd) {
  if (fd < FD_BASE || fd >= FD_BASE + MAX_OPEN || !guests[fd - FD_BASE].used) { errno = EBADF; return -1; }
  guests[fd - FD_BASE].used = 0;
  return 0;
}

static uint64_t mix(uint64_t h, const void *data, size_t len) {
  const unsigned char *p = data;
  for (size_t i = 0; i < len; i++) { h ^= p[i]; h *= 0x100000001b3ULL; }
  return h;
}

int ioctl(int fd, unsigned long request, ...) {
  va_list args;
  va_start(args, request);
  struct snp_guest_request_ioctl *io = va_arg(args, struct snp_guest_request_ioctl *);
  va_end(args);
  if (fd < FD_BASE || fd >= FD_BASE + MAX_OPEN || !guests[fd - FD_BASE].used) { errno = EBADF; return -1; }
  if (request != SNP_GET_DERIVED_KEY) { errno = ENOTTY; return -1; }
  if (io->msg_version == 0) { errno = EINVAL; return -1; }
  struct guest *g = &guests[fd - FD_BASE];
  struct snp_derived_key_req *req = (struct snp_derived_key_req *)(uintptr_t)io->req_data;
  struct snp_derived_key_resp *resp = (struct snp_derived_key_resp *)(uintptr_t)io->resp_data;
  memset(resp->data, 0, sizeof resp->data);
  io->exitinfo2 = 0;
  derive_calls++;
  last_field_select = req->guest_field_select;
  last_root_key_select = req->root_key_select;
  uint32_t status = 0;
  if (req->rsvd != 0 || (req->guest_field_select >> 6) != 0 || req->vmpl > 3 || req->guest_svn > g->guest_svn || req->tcb_version > g->tcb) status = STATUS_INVALID_PARAM;
  else if (req->root_key_select > 1 || (req->root_key_select == 1 && !g->has_vmrk)) status = STATUS_INVALID_KEY;
  memcpy(resp->data, &status, 4);
  if (status != 0) return 0;
  uint64_t h = 0xcbf29ce484222325ULL;
  h = mix(h, req->root_key_select == 1 ? g->vmrk : g->vcek, 32);
  h = mix(h, &req->guest_field_select, 8);
  h = mix(h, &req->vmpl, 4);
  if (req->guest_field_select & 1) h = mix(h, &g->policy, 8);
  if (req->guest_field_select & 2) h = mix(h, g->image_id, 16);
  if (req->guest_field_select & 4) h = mix(h, g->family_id, 16);
  if (req->guest_field_select & 8) h = mix(h, g->measurement, 48);
  if (req->guest_field_select & 16) h = mix(h, &req->guest_svn, 4);
  if (req->guest_field_select & 32) h = mix(h, &req->tcb_version, 8);
  for (int i = 0; i < 4; i++) {
    h = mix(h, &i, sizeof i);
    memcpy(resp->data + 32 + 8 * i, &h, 8);
  }
  return 0;
}

/* For the tests: what the last SNP_GET_DERIVED_KEY asked for, and how many were made. */
uint64_t fake_sev_guest_last_field_select(void) { return last_field_select; }
uint32_t fake_sev_guest_last_root_key_select(void) { return last_root_key_select; }
unsigned int fake_sev_guest_derive_calls(void) { return derive_calls; }
