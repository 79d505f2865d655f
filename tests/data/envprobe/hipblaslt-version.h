/* ************************************************************************
 * Copyright (C) 2022-2024 Advanced Micro Devices, Inc. All rights reserved.
 * ************************************************************************ */
/*! \file
 *  \brief hipblaslt-version.h provides the configured version and settings
 */

#ifndef _HIPBLASLT_VERSION_H_
#define _HIPBLASLT_VERSION_H_

// clang-format off
#define HIPBLASLT_VERSION_MAJOR 0
#define HIPBLASLT_VERSION_MINOR 8
#define HIPBLASLT_VERSION_PATCH 0
#define HIPBLASLT_VERSION_TWEAK 0a1a6b4e
// clang-format on

#endif
