////////////////////////////////////////////////////////////////////////////////
// rocm-core/rocm_version.h (ROCm 6.2.0) - header excerpt
////////////////////////////////////////////////////////////////////////////////
#ifndef _ROCM_VERSION_H_
#define _ROCM_VERSION_H_

#ifdef __cplusplus
extern "C" {
#endif  /* __cplusplus */

#define ROCM_VERSION_MAJOR   6
#define ROCM_VERSION_MINOR   2
#define ROCM_VERSION_PATCH   0

typedef enum {
  VerSuccess=0,
  VerIncorrecPararmeters,
  VerValuesNotDefined,
  VerErrorMAX
} VerErrors;

#define ROCM_BUILD_INFO "6.2.0.0-66~22.04"

VerErrors getROCmVersion(unsigned int* Major, unsigned int* Minor, unsigned int* Patch);

#ifdef __cplusplus
}  // end extern "C" block
#endif

#endif //_ROCM_VERSION_H_
