#include "hc/runtime/hcrt.h"

#include <gtest/gtest.h>

#include <string>

TEST(Version, LoadedLibraryMatchesHeader) {
  EXPECT_EQ(hcrt_version_major(), HCRT_VERSION_MAJOR);
  EXPECT_EQ(hcrt_version_minor(), HCRT_VERSION_MINOR);
  EXPECT_EQ(std::string(hcrt_version_string()),
            std::to_string(HCRT_VERSION_MAJOR) + "." +
                std::to_string(HCRT_VERSION_MINOR));
}
