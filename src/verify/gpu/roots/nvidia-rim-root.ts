/**
 * NVIDIA CoRIM signing Root CA: the root of the certificates that sign NVIDIA's reference integrity manifests
 * (RIMs) for GPU drivers and VBIOS images (self-signed, ECDSA P-384, valid 2023-03-16 to 2053-03-08).
 * Origin: NVIDIA/nvtrust, guest_tools/gpu_verifiers/local_gpu_verifier/src/verifier/certs/verifier_RIM_root.pem
 * (Apache-2.0); every RIM carries it as the last certificate of its KeyInfo.
 * SHA-256 fingerprint (DER): 12977b5115acb0381179279fffeb5a8c4d264971ebb32298023a465fa41df5d1
 * Compiled in on purpose: a root fetched at verification time is not a root.
 */
export const NVIDIA_RIM_ROOT = `-----BEGIN CERTIFICATE-----
MIICKTCCAbCgAwIBAgIQRdrjoA5QN73fh1N17LXicDAKBggqhkjOPQQDAzBFMQsw
CQYDVQQGEwJVUzEPMA0GA1UECgwGTlZJRElBMSUwIwYDVQQDDBxOVklESUEgQ29S
SU0gc2lnbmluZyBSb290IENBMCAXDTIzMDMxNjE1MzczNFoYDzIwNTMwMzA4MTUz
NzM0WjBFMQswCQYDVQQGEwJVUzEPMA0GA1UECgwGTlZJRElBMSUwIwYDVQQDDBxO
VklESUEgQ29SSU0gc2lnbmluZyBSb290IENBMHYwEAYHKoZIzj0CAQYFK4EEACID
YgAEuECyi9vNM+Iw2lfUzyBldHAwaC1HF7TCgp12QcEyUTm3Tagxwr48d55+K2VI
lWYIDk7NlAIQdcV/Ff7euGLI+Qauj93HsSI4WX298PpW54RTgz9tC+Q684caR/BX
WEeZo2MwYTAdBgNVHQ4EFgQUpaXrOPK4ZDAk08DBskn594zeZjAwHwYDVR0jBBgw
FoAUpaXrOPK4ZDAk08DBskn594zeZjAwDwYDVR0TAQH/BAUwAwEB/zAOBgNVHQ8B
Af8EBAMCAQYwCgYIKoZIzj0EAwMDZwAwZAIwHGDyscDP6ihHqRvZlI3eqZ4YkvjE
1duaN84tAHRVgxVMvNrp5Tnom3idHYGW/dskAjATvjIx6VzHm/4e2GiZAyZEIUBD
OKPzp5ei/A0iUZpdvngenDwV8Qa/wGdiTmJ7Bp4=
-----END CERTIFICATE-----
`;
