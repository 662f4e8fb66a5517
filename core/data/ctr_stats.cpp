#include "core/data/ctr_stats.h"

#include <algorithm>

#include <fmt/format.h>

namespace frugal::data {
namespace {

// Occurrences per id: open addressing with linear probing, 16 bytes a slot and at most half the
// slots used; one array rather than a heap node per id (the Kaggle file has ~33M distinct ids).
// kMissingCategory, which no field value can be, marks an empty slot.
class IdCounter {
 public:
  IdCounter() : slots_(1024, Slot{kMissingCategory, 0}) {}

  void add(uint64_t id) {
    if (2 * (used_ + 1) > slots_.size()) grow();
    Slot& s = find(slots_, id);
    if (s.id == kMissingCategory) {
      s.id = id;
      ++used_;
    }
    ++s.count;
  }

  template <class F>
  void for_each(F&& f) const {
    for (const Slot& s : slots_)
      if (s.id != kMissingCategory) f(s.id, s.count);
  }

 private:
  struct Slot {
    uint64_t id;
    uint64_t count;
  };

  static Slot& find(std::vector<Slot>& slots, uint64_t id) {
    uint64_t h = id * 0x9e3779b97f4a7c15ULL;
    h ^= h >> 29;
    const size_t mask = slots.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask)
      if (slots[i].id == id || slots[i].id == kMissingCategory) return slots[i];
  }

  void grow() {
    std::vector<Slot> bigger(2 * slots_.size(), Slot{kMissingCategory, 0});
    for (const Slot& s : slots_)
      if (s.id != kMissingCategory) find(bigger, s.id) = s;
    slots_.swap(bigger);
  }

  std::vector<Slot> slots_;
  size_t used_ = 0;
};

std::string percent(uint64_t part, uint64_t whole) {
  return whole ? fmt::format("{:.2f}%", 100.0 * static_cast<double>(part) / static_cast<double>(whole)) : "-";
}

}  // namespace

CtrStats compute_ctr_stats(CtrReader& reader) {
  CtrStats s;
  s.dense.resize(kCtrDense);
  s.cats.resize(kCtrCats);
  std::vector<IdCounter> counters(kCtrCats);
  std::vector<bool> seen(kCtrDense, false);
  CtrRecord r;
  while (reader.next_record(r)) {
    ++s.samples;
    s.clicks += r.label;
    for (size_t j = 0; j < kCtrDense; ++j) {
      CtrDenseStats& d = s.dense[j];
      if (r.int_missing[j]) {
        ++d.missing;
        continue;
      }
      const int64_t x = r.ints[j];
      d.negative += x < 0;
      d.min = seen[j] ? std::min(d.min, x) : x;
      d.max = seen[j] ? std::max(d.max, x) : x;
      seen[j] = true;
    }
    for (size_t f = 0; f < kCtrCats; ++f) {
      if (r.cats[f] == kMissingCategory) ++s.cats[f].missing;
      else counters[f].add(r.cats[f]);
    }
  }
  for (size_t f = 0; f < kCtrCats; ++f) {
    CtrFieldStats& c = s.cats[f];
    counters[f].for_each([&c](uint64_t id, uint64_t count) {
      ++c.distinct;
      if (count > c.top_count || (count == c.top_count && id < c.top_id)) {
        c.top_id = id;
        c.top_count = count;
      }
      if (count == 1) ++c.ids_once;
      else if (count < 10) ++c.ids_2_9;
      else if (count < 100) ++c.ids_10_99;
      else ++c.ids_100_plus;
    });
  }
  return s;
}

std::string CtrStats::format(const std::string& indent) const {
  std::string out;
  const auto line = [&](const std::string& text) { out += indent + text + "\n"; };
  line(fmt::format("samples   {}", samples));
  line(fmt::format("clicks    {} (CTR {})", clicks, percent(clicks, samples)));
  line("integer features: missing, negative, min, max");
  for (size_t j = 0; j < dense.size(); ++j) {
    const CtrDenseStats& d = dense[j];
    line(fmt::format("  {:<4} {:>8} {:>8} {:>12} {:>12}", ctr_column_name(2 + j), percent(d.missing, samples),
                     percent(d.negative, samples), d.min, d.max));
  }
  line("categorical fields: distinct ids, missing, top id (share of present values), ids seen 1 / 2-9 / 10-99 / 100+ times");
  for (size_t f = 0; f < cats.size(); ++f) {
    const CtrFieldStats& c = cats[f];
    const std::string top =
        c.distinct ? fmt::format("{:08x} ({})", c.top_id, percent(c.top_count, samples - c.missing)) : "-";
    line(fmt::format("  {:<4} {:>9} {:>8}  {:<22} {:>9} {:>9} {:>9} {:>9}", ctr_column_name(2 + kCtrDense + f),
                     c.distinct, percent(c.missing, samples), top, c.ids_once, c.ids_2_9, c.ids_10_99,
                     c.ids_100_plus));
  }
  return out;
}

}  // namespace frugal::data
