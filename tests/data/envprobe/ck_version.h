// SPDX-License-Identifier: MIT
// Copyright (c) 2018-2024, Advanced Micro Devices, Inc. All rights reserved.

#pragma once

#define CK_VERSION_MAJOR 1
#define CK_VERSION_MINOR 1
#define CK_VERSION_PATCH 0
#define CK_COMMIT_ID "50ee4267e27b875d149e642f4cebd47be1dc3b57"
