// Parsing of one GCIDE article (the text a dictd index entry of Debian's dict-gcide points at) into
// its headwords and its definitions, with GCIDE's markup resolved:
//   Banc \Banc\, Bancus \Ban"cus\, Bank \Bank\, n. [OF. banc, LL.     <- headwords, pronunciations,
//      bancus. See {Bank}, n.]                                        <- part of speech, etymology
//      1. A bench; a high seat ...  [1913 Webster]                    <- definition 1
//      2. ...                                                         <- definition 2
//      {In banc}, {In banco} ..., in full court ...                   <- sub-entries: other words
// - headwords: the `word \pron\` items that open the first line, joined by ", " or " or ";
// - the header (first line, plus the lines of an etymology [...] it opens) is left out;
// - definitions: the numbered senses ("   1. ") of the body, or the whole body when it has none;
//   Syn:/Usage:/Note: blocks stay with the sense they follow;
// - the body ends at the first sub-entry ("   {Phrase}" at the body's indentation): sub-entries
//   define other phrases, which have index entries of their own;
// - character escapes ([a^], ['e], [ae], [=o], ...) become their letters; other [...] groups
//   (sources such as [1913 Webster], usage tags such as [Obs.]) and \pronunciations\ are dropped;
//   braces of cross-references are dropped, their words kept.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace frugal::data {

struct GcideArticle {
  std::vector<std::string> headwords;    // as written, escapes resolved ("Bank", "Caf'e" -> "Cafe")
  std::vector<std::string> definitions;  // markup resolved, whitespace as in the text
};

GcideArticle parse_gcide_article(std::string_view article);

// Resolves escapes, drops other bracket groups, pronunciations and braces (see above).
std::string resolve_gcide_markup(std::string_view text);

// Lower-case words of at least two ASCII letters; anything else separates words.
std::vector<std::string> gcide_words(std::string_view text);

}  // namespace frugal::data
