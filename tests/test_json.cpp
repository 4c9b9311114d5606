#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "base/error.h"
#include "test_support.h"
#include "base/json.h"

namespace duet::json {
namespace {

using duet::testing::error_of;

std::string parse_error(std::string_view text) {
    return error_of([&] { parse(text, "config.json"); });
}

TEST(JsonParse, Literals) {
    EXPECT_TRUE(parse("null", "t").is_null());
    EXPECT_TRUE(parse("true", "t").as_bool("t"));
    EXPECT_FALSE(parse(" false ", "t").as_bool("t"));
    EXPECT_EQ(parse("\"hi\"", "t").as_string("t"), "hi");
    EXPECT_EQ(parse("\t\r\n 42 \n", "t").as_int("t"), 42);
}

TEST(JsonParse, NestedStructures) {
    Value v = parse(R"({"a": [1, 2, {"b": [true, null, "x"]}], "c": {"d": {}}, "e": []})", "t");
    ASSERT_TRUE(v.is_object());
    ASSERT_EQ(v.members().size(), 3u);
    EXPECT_EQ(v.members()[0].first, "a");
    EXPECT_EQ(v.members()[1].first, "c");
    EXPECT_EQ(v.members()[2].first, "e");
    const Value* a = v.find("a");
    ASSERT_NE(a, nullptr);
    ASSERT_TRUE(a->is_array());
    ASSERT_EQ(a->items().size(), 3u);
    EXPECT_EQ(a->items()[1].as_int("a[1]"), 2);
    const Value* b = a->items()[2].find("b");
    ASSERT_NE(b, nullptr);
    EXPECT_TRUE(b->items()[0].as_bool("b[0]"));
    EXPECT_TRUE(b->items()[1].is_null());
    EXPECT_EQ(b->items()[2].as_string("b[2]"), "x");
    EXPECT_TRUE(v.find("c")->find("d")->is_object());
    EXPECT_TRUE(v.find("c")->find("d")->members().empty());
    EXPECT_TRUE(v.find("e")->items().empty());
    EXPECT_EQ(v.find("missing"), nullptr);
    EXPECT_EQ(a->find("a"), nullptr);  // not an object
}

TEST(JsonParse, MembersKeepFileOrder) {
    Value v = parse(R"({"z": 1, "a": 2, "m": 3})", "t");
    ASSERT_EQ(v.members().size(), 3u);
    EXPECT_EQ(v.members()[0].first, "z");
    EXPECT_EQ(v.members()[1].first, "a");
    EXPECT_EQ(v.members()[2].first, "m");
}

TEST(JsonParse, StringEscapes) {
    EXPECT_EQ(parse(R"("a\"b\\c\/d\be\ff\ng\rh\ti")", "t").as_string("t"), "a\"b\\c/d\be\ff\ng\rh\ti");
    EXPECT_EQ(parse(R"("\u0041\u00e9\u4e2D")", "t").as_string("t"), "A\xC3\xA9\xE4\xB8\xAD");
    // U+1F600 as a surrogate pair.
    EXPECT_EQ(parse(R"("\ud83d\ude00")", "t").as_string("t"), "\xF0\x9F\x98\x80");
    // U+10FFFF, the last code point.
    EXPECT_EQ(parse(R"("\uDBFF\uDFFF")", "t").as_string("t"), "\xF4\x8F\xBF\xBF");
    // Raw UTF-8 passes through.
    EXPECT_EQ(parse("\"\xE2\x82\xAC\"", "t").as_string("t"), "\xE2\x82\xAC");
    EXPECT_EQ(parse(R"("\u0000")", "t").as_string("t"), std::string(1, '\0'));
}

TEST(JsonParse, Numbers) {
    EXPECT_EQ(parse("0", "t").as_int("t"), 0);
    EXPECT_EQ(parse("-17", "t").as_int("t"), -17);
    EXPECT_DOUBLE_EQ(parse("3.25", "t").as_number("t"), 3.25);
    EXPECT_DOUBLE_EQ(parse("-0.5", "t").as_number("t"), -0.5);
    EXPECT_DOUBLE_EQ(parse("1e-05", "t").as_number("t"), 1e-5);
    EXPECT_DOUBLE_EQ(parse("2.5E+3", "t").as_number("t"), 2500.0);
    EXPECT_DOUBLE_EQ(parse("6.02e23", "t").as_number("t"), 6.02e23);
    EXPECT_EQ(parse("1e3", "t").as_int("t"), 1000);
    EXPECT_EQ(parse("9223372036854775807", "t").as_int("t"), INT64_MAX);
    EXPECT_EQ(parse("-9223372036854775808", "t").as_int("t"), INT64_MIN);
    EXPECT_TRUE(std::signbit(parse("-0", "t").as_number("t")));
    EXPECT_EQ(parse("1e400", "t").as_number("t"), INFINITY);
    EXPECT_EQ(parse("-1e400", "t").as_number("t"), -INFINITY);
    EXPECT_EQ(parse("1e-400", "t").as_number("t"), 0.0);
    EXPECT_EQ(parse("123456789e-400", "t").as_number("t"), 0.0);
}

TEST(JsonParse, NonFiniteTokens) {
    Value v = parse("[Infinity, -Infinity, NaN]", "t");
    EXPECT_EQ(v.items()[0].as_number("t"), INFINITY);
    EXPECT_EQ(v.items()[1].as_number("t"), -INFINITY);
    EXPECT_TRUE(std::isnan(v.items()[2].as_number("t")));
    EXPECT_NE(parse_error("Inf").find("line 1"), std::string::npos);
    EXPECT_NE(parse_error("-NaN").find("line 1"), std::string::npos);
}

TEST(JsonParse, TransformersFloatObject) {
    Value v = parse(R"([{"__float__": "Infinity"}, {"__float__": "-Infinity"}, {"__float__": "NaN"},
                        {"__float__": "Huge"}, {"__float__": 1}])",
                    "t");
    EXPECT_EQ(v.items()[0].as_number("x"), INFINITY);
    EXPECT_EQ(v.items()[1].as_number("x"), -INFINITY);
    EXPECT_TRUE(std::isnan(v.items()[2].as_number("x")));
    EXPECT_NE(error_of([&] { v.items()[3].as_number("cfg: eps"); }).find("cfg: eps"), std::string::npos);
    EXPECT_NE(error_of([&] { v.items()[4].as_number("cfg: eps"); }).find("expected a number"), std::string::npos);
}

TEST(JsonAccess, TypeErrorsNameTheValue) {
    Value v = parse(R"({"hidden_size": "abc", "flag": 1, "name": 5, "x": 1.5})", "config.json");
    EXPECT_EQ(error_of([&] { v.find("hidden_size")->as_int("config.json: hidden_size"); }),
              "config.json: hidden_size: expected an integer, got string \"abc\"");
    EXPECT_EQ(error_of([&] { v.find("flag")->as_bool("config.json: flag"); }),
              "config.json: flag: expected true or false, got number 1");
    EXPECT_EQ(error_of([&] { v.find("name")->as_string("config.json: name"); }),
              "config.json: name: expected a string, got number 5");
    EXPECT_EQ(error_of([&] { v.find("x")->as_int("config.json: x"); }),
              "config.json: x: expected an integer, got number 1.5");
    EXPECT_NE(error_of([&] { v.as_number("config.json"); }).find("got an object"), std::string::npos);
}

TEST(JsonAccess, IntegerRange) {
    EXPECT_NE(error_of([] { parse("9223372036854775808", "t").as_int("n"); }).find("out of range"),
              std::string::npos);
    EXPECT_NE(error_of([] { parse("-9223372036854775809", "t").as_int("n"); }).find("out of range"),
              std::string::npos);
    EXPECT_NE(error_of([] { parse("1e300", "t").as_int("n"); }).find("out of range"), std::string::npos);
    EXPECT_NE(error_of([] { parse("Infinity", "t").as_int("n"); }).find("expected an integer"),
              std::string::npos);
    EXPECT_NE(error_of([] { parse("NaN", "t").as_int("n"); }).find("expected an integer"), std::string::npos);
    EXPECT_NE(error_of([] { parse("0.1", "t").as_int("n"); }).find("expected an integer"), std::string::npos);
    // A large integer written as a float still converts when it is exact.
    EXPECT_EQ(parse("4.0e15", "t").as_int("n"), 4000000000000000);
}

TEST(JsonParseErrors, ReportSourceLineAndColumn) {
    EXPECT_EQ(parse_error("{\n  \"a\": 1,\n  \"b\": 2 \"c\": 3\n}"),
              "config.json: line 3, column 10: expected ',' or '}' in an object");
    EXPECT_EQ(parse_error("[1, 2"), "config.json: line 1, column 6: expected ',' or ']' in an array");
}

TEST(JsonParseErrors, EveryMalformedClassThrows) {
    const char* cases[] = {
        "",                    // empty input
        "   ",                 // only whitespace
        "{",                   // unterminated object
        "[",                   // unterminated array
        "[1,]",                // trailing comma in array
        "{\"a\":1,}",          // trailing comma in object
        "{\"a\" 1}",           // missing colon
        "{a: 1}",              // unquoted key
        "{1: 1}",              // number key
        "\"abc",               // unterminated string
        "\"a\\",               // unterminated escape
        "\"\\x\"",             // invalid escape
        "\"\\u12\"",           // short \u
        "\"\\u12G4\"",         // bad hex
        "\"\\ud83d\"",         // lone high surrogate
        "\"\\ud83dx\"",        // high surrogate then text
        "\"\\ud83d\\u0041\"",  // high surrogate then non-surrogate
        "\"\\ude00\"",         // lone low surrogate
        "\"a\nb\"",            // raw control character
        "\"a\tb\"",            // raw tab
        "01",                  // leading zero
        "-",                   // sign alone
        "1.",                  // no fraction digits
        ".5",                  // no integer part
        "1e",                  // no exponent digits
        "1e+",                 // no exponent digits after sign
        "+1",                  // plus sign
        "0x10",                // hex
        "tru",                 // truncated literal
        "nul",                 // truncated literal
        "True",                // wrong case
        "infinity",            // wrong case
        "1 2",                 // trailing garbage
        "{} x",                // trailing garbage
        "[1] ]",               // extra bracket
        "{\"a\":1,\"a\":2}",   // duplicate key
        "\xEF\xBB\xBF{}",      // byte order mark
        "[1,,2]",              // empty element
        "/* c */ 1",           // comment
    };
    for (const char* text : cases) {
        std::string message = parse_error(text);
        EXPECT_NE(message.find("config.json"), std::string::npos) << "input: " << text << " -> " << message;
        EXPECT_NE(message.find("line"), std::string::npos) << "input: " << text << " -> " << message;
        EXPECT_NE(message.find("column"), std::string::npos) << "input: " << text << " -> " << message;
    }
    // An embedded NUL byte is garbage, not the end of the input.
    EXPECT_NE(parse_error(std::string_view("1\0", 2)).find("line 1, column 2"), std::string::npos);
}

TEST(JsonParseErrors, DeepNestingIsAnErrorNotACrash) {
    std::string deep_arrays(100000, '[');
    EXPECT_NE(parse_error(deep_arrays).find("nesting deeper than"), std::string::npos);
    std::string deep_objects;
    for (int i = 0; i < 100000; ++i) deep_objects += "{\"a\":";
    EXPECT_NE(parse_error(deep_objects).find("nesting deeper than"), std::string::npos);
    // 512 levels are fine.
    std::string ok = std::string(512, '[') + std::string(512, ']');
    EXPECT_NO_THROW(parse(ok, "t"));
    std::string too_deep = std::string(513, '[') + std::string(513, ']');
    EXPECT_NE(parse_error(too_deep).find("nesting"), std::string::npos);
}

TEST(JsonDump, CompactOutput) {
    Value v = Value::object();
    v.set("name", "duet").set("layers", 9).set("eps", 1e-5).set("tied", false).set("none", nullptr);
    Value list = Value::array();
    list.push(1).push(2.5).push("x\"y\n");
    v.set("list", std::move(list));
    EXPECT_EQ(dump(v),
              R"({"name":"duet","layers":9,"eps":1.0000000000000001e-05,"tied":false,"none":null,"list":[1,2.5,"x\"y\n"]})");
    v.set("layers", 10);  // replaces in place
    EXPECT_EQ(dump(*v.find("layers")), "10");
    EXPECT_EQ(v.members()[1].first, "layers");
}

TEST(JsonDump, Numbers) {
    EXPECT_EQ(dump(Value(1.0)), "1");
    EXPECT_EQ(dump(Value(-3.0)), "-3");
    EXPECT_EQ(dump(Value(9007199254740992.0)), "9007199254740992");
    EXPECT_EQ(dump(Value(1e20)), "1e+20");
    EXPECT_EQ(dump(Value(0.1)), "0.10000000000000001");
    EXPECT_EQ(dump(Value(INT64_MAX)), "9223372036854775807");
    EXPECT_EQ(dump(Value(uint64_t{18446744073709551615u})), "1.8446744073709552e+19");
    EXPECT_EQ(dump(Value(INFINITY)), "Infinity");
    EXPECT_EQ(dump(Value(-INFINITY)), "-Infinity");
    EXPECT_EQ(dump(Value(NAN)), "NaN");
    EXPECT_EQ(dump(Value(-0.0)), "-0.0");
}

TEST(JsonDump, StringEscapes) {
    EXPECT_EQ(dump(Value(std::string("a\\b\x01\x1f\t\b\f\r", 9))), R"("a\\b\u0001\u001f\t\b\f\r")");
    EXPECT_EQ(dump(Value("\xE4\xB8\xAD")), "\"\xE4\xB8\xAD\"");
}

TEST(JsonDump, RoundTrip) {
    std::string text =
        R"({"a":[1,-2,3.5,1e-07,1.7976931348623157e+308,5e-324,Infinity,-Infinity,NaN,-0.0],)"
        R"("s":"\"\\\n\u0001\u00e9\ud83d\ude00","n":null,"t":true,"f":false,"o":{"x":{}},"e":[],)"
        R"("big":9223372036854775807,"neg":-9223372036854775808})";
    Value first = parse(text, "t");
    std::string dumped = dump(first);
    Value second = parse(dumped, "t");
    EXPECT_EQ(dump(second), dumped);
    const auto& a = second.find("a")->items();
    EXPECT_EQ(a[3].as_number("t"), 1e-07);
    EXPECT_EQ(a[4].as_number("t"), 1.7976931348623157e+308);
    EXPECT_EQ(a[5].as_number("t"), 5e-324);
    EXPECT_TRUE(std::isnan(a[8].as_number("t")));
    EXPECT_TRUE(std::signbit(a[9].as_number("t")));
    EXPECT_EQ(second.find("s")->as_string("t"), first.find("s")->as_string("t"));
    EXPECT_EQ(second.find("big")->as_int("t"), INT64_MAX);
    EXPECT_EQ(second.find("neg")->as_int("t"), INT64_MIN);
    // Doubles with awkward digits survive exactly.
    for (double d : {0.1, 1.0 / 3.0, 2.0 / 3.0 * 1e-300, 123456.789e10, -4.4e-10}) {
        EXPECT_EQ(parse(dump(Value(d)), "t").as_number("t"), d);
    }
}

TEST(JsonFile, ParseFileAndMissingFile) {
    auto dir = std::filesystem::temp_directory_path() / ("duet_json_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    std::string path = (dir / "config.json").string();
    {
        std::ofstream out(path);
        out << "{\"hidden_size\": 64,\n \"bad\": }";
    }
    std::string message = error_of([&] { parse_file(path); });
    EXPECT_NE(message.find(path + ": line 2, column 9"), std::string::npos) << message;
    {
        std::ofstream out(path);
        out << "{\"hidden_size\": 64}";
    }
    EXPECT_EQ(parse_file(path).find("hidden_size")->as_int("hidden_size"), 64);
    std::string empty_path = (dir / "empty.json").string();
    std::ofstream(empty_path).close();
    EXPECT_NE(error_of([&] { parse_file(empty_path); }).find("line 1, column 1"), std::string::npos);

    std::string missing = (dir / "missing.json").string();
    std::string missing_message = error_of([&] { parse_file(missing); });
    EXPECT_NE(missing_message.find(missing), std::string::npos);
    EXPECT_NE(missing_message.find("No such file"), std::string::npos);
    std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace duet::json
