/* ************************************************************************
 * Copyright (C) 2016-2024 Advanced Micro Devices, Inc. All rights reserved.
 * ************************************************************************ */
/*! \file
 *  \brief rocblas-version.h provides the configured version and settings
 */

#ifndef ROCBLAS_VERSION_H_
#define ROCBLAS_VERSION_H_

// clang-format off
#define ROCBLAS_VERSION_MAJOR       4
#define ROCBLAS_VERSION_MINOR       2
#define ROCBLAS_VERSION_PATCH       0
#define ROCBLAS_VERSION_TWEAK       0a1a6b4e
// clang-format on

#endif
