#include "core/data/ctr_reader.h"

#include <fmt/format.h>

#include "core/check.h"
#include "core/data/gz_istream.h"
#include "core/data/line_input.h"
#include "core/data/packed_file.h"

namespace frugal::data {

CtrReader::CtrReader(const std::string& path) : name_(path), path_(path) {
  if (is_packed_file(path)) {
    packed_ = std::make_unique<PackedReader>(path);
    if (packed_->header().kind != PackedKind::clicks)
      throw Error(fmt::format("{}: a packed sparse data set (XMC or IDX), not Criteo-format click logs (it trains "
                              "--model xmc)",
                              path));
    return;
  }
  owned_ = std::make_unique<GzIstream>(path);
  in_ = owned_.get();
}

CtrReader::CtrReader(std::istream& in, const std::string& name) : in_(&in), name_(name) {}

CtrReader::~CtrReader() = default;
CtrReader::CtrReader(CtrReader&&) noexcept = default;
CtrReader& CtrReader::operator=(CtrReader&&) noexcept = default;

bool CtrReader::next_packed(CtrRecord& out) {
  while (packed_served_ == packed_rows_.size()) {
    if (packed_block_ == packed_->header().blocks()) {
      finished_ = true;
      return false;
    }
    packed_rows_.clear();
    packed_served_ = 0;
    packed_->read_clicks(packed_block_++, packed_rows_);
  }
  out = packed_rows_[packed_served_++];
  ++line_no_;
  ++samples_read_;
  return true;
}

bool CtrReader::next_record(CtrRecord& out) {
  if (finished_) return false;
  if (packed_) return next_packed(out);
  if (read_line(*in_, text_, kMaxLineBytes, name_, line_no_ + 1, "is this a Criteo-format TSV file?")) {
    ++line_no_;
    out = parse_ctr_line(text_, name_, line_no_);
    ++samples_read_;
    return true;
  }
  if (in_->bad()) {
    const auto* gz = dynamic_cast<const GzIstream*>(in_);
    const std::string why = gz != nullptr ? gz->error() : std::string();
    throw Error(fmt::format("{}:{}: read error{}{}", name_, line_no_ + 1, why.empty() ? "" : ": ", why));
  }
  finished_ = true;
  return false;
}

size_t CtrReader::next(size_t max_samples, CtrBatch& out) {
  FRUGAL_CHECK(max_samples > 0, "CtrReader::next: ask for at least one sample");
  out.clear();
  while (out.size < max_samples && next_record(record_)) append_record(record_, out);
  return out.size;
}

void CtrReader::rewind() {
  if (packed_) {
    packed_block_ = packed_served_ = 0;
    packed_rows_.clear();
  } else if (!path_.empty()) {
    owned_ = std::make_unique<GzIstream>(path_);
    in_ = owned_.get();
  } else {
    in_->clear();
    in_->seekg(0);
    if (!*in_) throw Error(fmt::format("{}: cannot rewind this stream", name_));
  }
  line_no_ = samples_read_ = 0;
  finished_ = false;
}

CtrDataset load_ctr(const std::string& path) {
  CtrReader reader(path);
  CtrDataset all;
  CtrBatch batch;
  while (reader.next(size_t{1} << 16, batch) > 0) {
    all.labels.insert(all.labels.end(), batch.labels.begin(), batch.labels.end());
    all.dense.insert(all.dense.end(), batch.dense.begin(), batch.dense.end());
    all.cats.insert(all.cats.end(), batch.cats.begin(), batch.cats.end());
    all.size += batch.size;
  }
  return all;
}

}  // namespace frugal::data
