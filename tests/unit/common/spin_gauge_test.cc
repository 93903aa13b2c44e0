// SPDX-License-Identifier: BSD-3-Clause
// SpinGauge: spins while they find their event, stops when they keep
// missing, and probes its way back.
#include "common/transport/spin_gauge.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace rpmem::transport {
namespace {

// Of `waits` waits, how many the gauge lets spin, each finding its event
// or not as `caught` says.
unsigned spins_of(SpinGauge &g, unsigned waits, bool caught) {
  unsigned spins = 0;
  for (unsigned i = 0; i < waits; ++i) {
    if (!g.should_spin()) continue;
    ++spins;
    g.spun(caught);
  }
  return spins;
}

TEST(SpinGauge, SpinsWhileSpinsFindTheirEvent) {
  SpinGauge g;
  EXPECT_EQ(spins_of(g, 1000, true), 1000u);
}

TEST(SpinGauge, StopsSpinningWhenSpinsKeepMissing) {
  SpinGauge g;
  // A handful of misses in a row: then only every 16th wait spins.
  const unsigned first = spins_of(g, 16, false);
  EXPECT_GE(first, 2u);
  EXPECT_LE(first, 4u);
  EXPECT_LE(spins_of(g, 1600, false), 101u);
}

TEST(SpinGauge, AMissNowAndThenDoesNotStopIt) {
  SpinGauge g;
  for (int round = 0; round < 100; ++round) {
    ASSERT_TRUE(g.should_spin());
    g.spun(round % 8 != 0);  // seven of eight found
  }
}

TEST(SpinGauge, ASpinThatFindsHalfOfItsEventsStops) {
  SpinGauge g;
  unsigned spins = 0;
  for (int round = 0; round < 1600; ++round)
    if (g.should_spin()) g.spun(++spins % 2 == 0);
  EXPECT_LE(spins, 200u);
}

TEST(SpinGauge, ProbesFindThatSpinningPaysAgain) {
  SpinGauge g;
  spins_of(g, 1000, false);
  ASSERT_LE(spins_of(g, 16, false), 1u);
  // The next probes catch: after a few of them it spins at every wait.
  unsigned waits = 0;
  while (waits < 1000 && spins_of(g, 16, true) < 16) waits += 16;
  EXPECT_LT(waits, 200u);
  EXPECT_EQ(spins_of(g, 100, true), 100u);
}

TEST(WaitSpin, SpinsAQuarterLongerThanRecentWaitsWithinItsBounds) {
  using std::chrono::microseconds;
  WaitSpin w;
  EXPECT_EQ(w.budget(), WaitSpin::kMinSpin) << "nothing waited yet";
  for (int i = 0; i < 40; ++i) w.took(microseconds(80));
  const double us = std::chrono::duration<double, std::micro>(w.budget()).count();
  EXPECT_NEAR(us, 100.0, 1.0);
  for (int i = 0; i < 40; ++i) w.took(microseconds(1000));
  EXPECT_EQ(w.budget(), WaitSpin::kMaxSpin);
  for (int i = 0; i < 40; ++i) w.took(microseconds(1));
  EXPECT_EQ(w.budget(), WaitSpin::kMinSpin);
}

TEST(WaitSpin, NapsHalfOfWaitsAsLongAsADeviceThenSpinsToTwiceThem) {
  using std::chrono::microseconds;
  const auto us = [](std::chrono::nanoseconds d) {
    return std::chrono::duration<double, std::micro>(d).count();
  };
  WaitSpin w;
  for (int i = 0; i < 40; ++i) w.took(microseconds(80));
  EXPECT_EQ(w.nap().count(), 0) << "a round trip: no nap";
  EXPECT_NEAR(us(w.budget(w.nap())), 100.0, 1.0);
  for (int i = 0; i < 40; ++i) w.took(microseconds(110));
  EXPECT_NEAR(us(w.nap()), 55.0, 1.0);
  EXPECT_NEAR(us(w.budget(w.nap())), 165.0, 1.0) << "nap and spin end at 2x the waits";
  for (int i = 0; i < 40; ++i) w.took(microseconds(2000));
  EXPECT_NEAR(us(w.nap()), 1000.0, 1.0);
  EXPECT_EQ(w.budget(w.nap()), WaitSpin::kMaxSpin);
}

TEST(WaitSpin, NoNapWhileNapsKeepEndingAfterTheirEventUntilProbesEndInTime) {
  WaitSpin w;
  for (int i = 0; i < 40; ++i) w.took(std::chrono::microseconds(200));
  unsigned naps = 0;
  for (int i = 0; i < 160; ++i) {
    if (w.nap().count() == 0) continue;
    ++naps;
    w.napped(false);  // the event was there when it woke
  }
  EXPECT_LE(naps, 20u);
  // Probes that end in time: after a few of them it naps at every wait.
  unsigned waits = 0, in_row = 0;
  for (; waits < 1000 && in_row < 32; ++waits) {
    if (w.nap().count() == 0) {
      in_row = 0;
      continue;
    }
    ++in_row;
    w.napped(true);
  }
  EXPECT_LT(waits, 200u);
}

TEST(WaitSpin, NoSpinWhileSpinsKeepMissing) {
  WaitSpin w;
  unsigned zero = 0;
  for (int i = 0; i < 160; ++i) {
    if (w.budget().count() == 0) {
      ++zero;
      continue;
    }
    w.spun(false);
  }
  EXPECT_GE(zero, 140u);
}

TEST(SpinSlots, OnePerTwoCpusAtLeastOneAndEachKindItsOwn) {
  struct Kind;
  struct Other;
  const unsigned limit = std::max(1u, usable_cpus() / 2);
  unsigned taken = 0;
  while (taken < limit + 4 && SpinSlots<Kind>::take()) ++taken;
  EXPECT_EQ(taken, limit);
  EXPECT_FALSE(SpinSlots<Kind>::take()) << "all slots are held";
  EXPECT_TRUE(SpinSlots<Other>::take()) << "another kind counts its own";
  SpinSlots<Other>::give_back();
  SpinSlots<Kind>::give_back();
  EXPECT_TRUE(SpinSlots<Kind>::take()) << "a slot given back is free again";
  for (unsigned i = 0; i < taken; ++i) SpinSlots<Kind>::give_back();
}

TEST(SpinSlots, AHoldKeepsItsSlotUntilReleasedOrGone) {
  struct Kind;
  const unsigned limit = std::max(1u, usable_cpus() / 2);
  for (unsigned i = 1; i < limit; ++i) ASSERT_TRUE(SpinSlots<Kind>::take());
  {
    SpinSlots<Kind>::Hold a, b;
    EXPECT_TRUE(a.take()) << "the last free slot";
    EXPECT_TRUE(a.take()) << "a hold keeps its slot";
    EXPECT_FALSE(b.take()) << "all slots are held";
    a.release();
    EXPECT_TRUE(b.take()) << "a released slot is free again";
  }
  EXPECT_TRUE(SpinSlots<Kind>::take()) << "a hold that ends gives its slot back";
  for (unsigned i = 0; i < limit; ++i) SpinSlots<Kind>::give_back();
}

}  // namespace
}  // namespace rpmem::transport
