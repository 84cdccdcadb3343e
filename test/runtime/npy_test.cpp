#include "hc/base/npy.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

using namespace hc::rt;

TEST(Npy, RoundTripsOddShapesAndDtypes) {
  std::string path = ::testing::TempDir() + "/hc_npy_rt.npy", err;
  std::vector<float> f(3 * 5 * 7);
  for (std::size_t i = 0; i < f.size(); ++i)
    f[i] = 0.5f * static_cast<float>(i) - 3.f;
  ASSERT_TRUE(writeNpy(path, "f4", {3, 5, 7}, f.data(), err)) << err;
  NpyArray a;
  ASSERT_TRUE(readNpy(path, a, err)) << err;
  EXPECT_EQ(a.header.dtype, "f4");
  EXPECT_EQ(a.header.shape, (std::vector<int64_t>{3, 5, 7}));
  for (std::size_t i = 0; i < f.size(); ++i)
    EXPECT_EQ(a.as<float>()[i], f[i]);

  int64_t v[1] = {42};
  ASSERT_TRUE(writeNpy(path, "i8", {1}, v, err)) << err;
  ASSERT_TRUE(readNpy(path, a, err)) << err;
  EXPECT_EQ(a.header.shape, (std::vector<int64_t>{1}));
  EXPECT_EQ(a.as<int64_t>()[0], 42);

  double s = 2.5;  // 0-d array
  ASSERT_TRUE(writeNpy(path, "f8", {}, &s, err)) << err;
  ASSERT_TRUE(readNpy(path, a, err)) << err;
  EXPECT_TRUE(a.header.shape.empty());
  EXPECT_EQ(a.as<double>()[0], 2.5);
  std::remove(path.c_str());
}

TEST(Npy, RejectsTruncatedAndForeignFiles) {
  std::string path = ::testing::TempDir() + "/hc_npy_bad.npy", err;
  std::vector<double> d(10, 1.0);
  ASSERT_TRUE(writeNpy(path, "f8", {10}, d.data(), err));
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  NpyHeader h;
  EXPECT_FALSE(parseNpyHeader(bytes.data(), bytes.size() - 8, h, err));
  EXPECT_NE(err.find("truncated"), std::string::npos) << err;
  std::string text = "hello, not numpy";
  EXPECT_FALSE(parseNpyHeader(text.data(), text.size(), h, err));
  NpyArray a;
  EXPECT_FALSE(readNpy("/nonexistent/x.npy", a, err));
  EXPECT_NE(err.find("/nonexistent/x.npy"), std::string::npos);
  std::remove(path.c_str());
}
