#include "io/torch_pickle.h"

#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "base/error.h"

namespace duet {

namespace {

// The only callables a state dict needs. They are never called: REDUCE on them builds the value
// that call would have returned, from arguments checked here.
enum class Global { OrderedDict, RebuildTensorV2, Storage };

struct Value;
using ValuePtr = std::shared_ptr<Value>;

struct Value {
    enum class Kind { None, Bool, Int, String, Tuple, Dict, Global, Storage, Tensor } kind = Kind::None;
    int64_t integer = 0;
    std::string text;                                // String; Storage: its key
    std::vector<ValuePtr> items;                     // Tuple
    std::vector<std::pair<ValuePtr, ValuePtr>> dict;  // Dict, in insertion order
    Global global = Global::OrderedDict;
    DType dtype = DType::F32;  // Global::Storage, Storage, Tensor
    PickledTensor tensor;      // Tensor (name filled in when it is put in the dict)
};

std::optional<DType> storage_dtype(std::string_view name) {
    static const std::map<std::string_view, DType> kStorages = {
        {"FloatStorage", DType::F32}, {"HalfStorage", DType::F16},  {"BFloat16Storage", DType::BF16},
        {"LongStorage", DType::I64},  {"IntStorage", DType::I32},   {"CharStorage", DType::I8},
        {"ByteStorage", DType::U8},
    };
    auto it = kStorages.find(name);
    if (it == kStorages.end()) return std::nullopt;
    return it->second;
}

// Bounds the work a hostile pickle can ask for; a real state dict is far inside these.
constexpr size_t kMaxStack = 1 << 20;
constexpr size_t kMaxMemo = 1 << 22;
constexpr size_t kMaxRank = 16;

class Unpickler {
public:
    Unpickler(const uint8_t* data, size_t size, const std::string& source) : p_(data), end_(data + size), source_(source) {}
    // A hostile pickle can nest containers a million deep or make a dict hold itself; emptying every
    // container here makes their destruction flat and breaks any cycle.
    ~Unpickler() {
        for (const ValuePtr& c : containers_) {
            c->items.clear();
            c->dict.clear();
        }
    }

    std::vector<PickledTensor> run();

private:
    ValuePtr make(Value::Kind kind) {
        auto v = std::make_shared<Value>();
        v->kind = kind;
        if (kind == Value::Kind::Tuple || kind == Value::Kind::Dict) containers_.push_back(v);
        return v;
    }
    [[noreturn]] void bad(const std::string& what) const {
        fail(source_, ": data.pkl at byte ", pos(), ": ", what, "; only a torch.save of a tensor state dict is accepted");
    }
    size_t pos() const { return static_cast<size_t>(op_start_ - start_); }

    const uint8_t* take(size_t n) {
        if (static_cast<size_t>(end_ - p_) < n) bad("truncated pickle");
        const uint8_t* at = p_;
        p_ += n;
        return at;
    }
    uint64_t le(size_t n) {
        const uint8_t* b = take(n);
        uint64_t v = 0;
        for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(b[i]) << (8 * i);
        return v;
    }
    std::string line() {
        const uint8_t* nl = static_cast<const uint8_t*>(std::memchr(p_, '\n', static_cast<size_t>(end_ - p_)));
        if (!nl) bad("truncated GLOBAL");
        std::string s(reinterpret_cast<const char*>(p_), static_cast<size_t>(nl - p_));
        p_ = nl + 1;
        return s;
    }

    void push(ValuePtr v) {
        if (stack_.size() >= kMaxStack) bad("stack too deep");
        stack_.push_back(std::move(v));
    }
    ValuePtr pop() {
        if (stack_.size() <= mark_floor()) bad("stack underflow");
        ValuePtr v = std::move(stack_.back());
        stack_.pop_back();
        return v;
    }
    size_t mark_floor() const { return marks_.empty() ? 0 : marks_.back(); }
    std::vector<ValuePtr> pop_to_mark() {
        if (marks_.empty()) bad("no MARK to pop to");
        std::vector<ValuePtr> items(stack_.begin() + static_cast<std::ptrdiff_t>(marks_.back()), stack_.end());
        stack_.resize(marks_.back());
        marks_.pop_back();
        return items;
    }
    void memo_put(uint64_t index) {
        if (stack_.empty()) bad("PUT on an empty stack");
        if (memo_.size() >= kMaxMemo && !memo_.count(index)) bad("memo too large");
        memo_[index] = stack_.back();
    }
    void memo_get(uint64_t index) {
        auto it = memo_.find(index);
        if (it == memo_.end()) bad(str_cat("GET of memo ", index, ", never PUT"));
        push(it->second);
    }

    ValuePtr tuple_of(std::vector<ValuePtr> items) {
        ValuePtr t = make(Value::Kind::Tuple);
        t->items = std::move(items);
        return t;
    }
    void global(const std::string& module, const std::string& name);
    ValuePtr persistent_load(const ValuePtr& pid);
    ValuePtr reduce(const ValuePtr& callable, const ValuePtr& args);
    void set_item(const ValuePtr& dict, ValuePtr key, ValuePtr value);
    int64_t as_int(const ValuePtr& v, const char* what) const {
        if (v->kind != Value::Kind::Int) bad(str_cat(what, " is not an integer"));
        return v->integer;
    }
    std::vector<int64_t> int_tuple(const ValuePtr& v, const char* what) const {
        if (v->kind != Value::Kind::Tuple || v->items.size() > kMaxRank) bad(str_cat(what, " is not a tuple of at most ", kMaxRank, " integers"));
        std::vector<int64_t> out;
        for (const ValuePtr& i : v->items) out.push_back(as_int(i, what));
        return out;
    }

    const uint8_t* p_;
    const uint8_t* end_;
    const uint8_t* start_ = p_;
    const uint8_t* op_start_ = p_;
    const std::string& source_;
    std::vector<ValuePtr> stack_;
    std::vector<size_t> marks_;
    std::unordered_map<uint64_t, ValuePtr> memo_;
    std::vector<ValuePtr> containers_;
};

void Unpickler::global(const std::string& module, const std::string& name) {
    ValuePtr g = make(Value::Kind::Global);
    if (module == "collections" && name == "OrderedDict") {
        g->global = Global::OrderedDict;
    } else if (module == "torch._utils" && name == "_rebuild_tensor_v2") {
        g->global = Global::RebuildTensorV2;
    } else if (auto dtype = module == "torch" ? storage_dtype(name) : std::nullopt) {
        g->global = Global::Storage;
        g->dtype = *dtype;
    } else {
        bad(str_cat("refusing global '", module, ".", name, "'"));
    }
    push(std::move(g));
}

// torch.save names each storage by ('storage', StorageType, key, location, numel).
ValuePtr Unpickler::persistent_load(const ValuePtr& pid) {
    const auto& it = pid->items;
    if (pid->kind != Value::Kind::Tuple || it.size() != 5 || it[0]->kind != Value::Kind::String ||
        it[0]->text != "storage" || it[1]->kind != Value::Kind::Global || it[1]->global != Global::Storage ||
        it[2]->kind != Value::Kind::String || it[3]->kind != Value::Kind::String)
        bad("persistent id is not ('storage', type, key, location, numel)");
    ValuePtr s = make(Value::Kind::Storage);
    s->dtype = it[1]->dtype;
    s->text = it[2]->text;
    s->integer = as_int(it[4], "storage element count");
    if (s->integer < 0) bad("negative storage element count");
    return s;
}

ValuePtr Unpickler::reduce(const ValuePtr& callable, const ValuePtr& args) {
    if (callable->kind != Value::Kind::Global) bad("REDUCE on something that is not an allowed global");
    if (args->kind != Value::Kind::Tuple) bad("REDUCE arguments are not a tuple");
    const auto& a = args->items;
    switch (callable->global) {
        case Global::OrderedDict:
            if (!a.empty()) bad("OrderedDict called with arguments");
            return make(Value::Kind::Dict);
        case Global::RebuildTensorV2: {
            // (storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
            if (a.size() != 6 && a.size() != 7) bad("_rebuild_tensor_v2 takes 6 or 7 arguments");
            if (a[0]->kind != Value::Kind::Storage) bad("_rebuild_tensor_v2 without a storage");
            if (a[4]->kind != Value::Kind::Bool) bad("requires_grad is not a bool");
            if (a[5]->kind != Value::Kind::Dict || !a[5]->dict.empty()) bad("tensor with backward hooks");
            if (a.size() == 7 && a[6]->kind != Value::Kind::None && (a[6]->kind != Value::Kind::Dict || !a[6]->dict.empty()))
                bad("tensor with python metadata");
            ValuePtr t = make(Value::Kind::Tensor);
            t->tensor.dtype = a[0]->dtype;
            t->tensor.storage_key = a[0]->text;
            t->tensor.storage_numel = a[0]->integer;
            t->tensor.offset = as_int(a[1], "storage offset");
            t->tensor.shape = int_tuple(a[2], "tensor size");
            t->tensor.stride = int_tuple(a[3], "tensor stride");
            if (t->tensor.shape.size() != t->tensor.stride.size()) bad("tensor size and stride differ in rank");
            return t;
        }
        case Global::Storage:
            bad("storage type called directly");
    }
    bad("unknown global");
}

void Unpickler::set_item(const ValuePtr& dict, ValuePtr key, ValuePtr value) {
    if (dict->kind != Value::Kind::Dict) bad("SETITEM on something that is not a dict");
    dict->dict.emplace_back(std::move(key), std::move(value));
}

std::vector<PickledTensor> Unpickler::run() {
    using K = Value::Kind;
    while (true) {
        op_start_ = p_;
        const uint8_t op = *take(1);
        switch (op) {
            case 0x80: {  // PROTO
                const uint64_t v = le(1);
                if (v < 2 || v > 5) bad(str_cat("pickle protocol ", v));
                break;
            }
            case 0x95: le(8); break;  // FRAME: a length hint only
            case '}': push(make(K::Dict)); break;  // EMPTY_DICT
            case ')': push(make(K::Tuple)); break;  // EMPTY_TUPLE
            case '(':  // MARK
                if (marks_.size() >= kMaxStack) bad("too many MARKs");
                marks_.push_back(stack_.size());
                break;
            case 'X':      // BINUNICODE
            case 0x8c: {  // SHORT_BINUNICODE
                const size_t n = static_cast<size_t>(le(op == 'X' ? 4 : 1));
                const uint8_t* s = take(n);
                ValuePtr v = make(K::String);
                v->text.assign(reinterpret_cast<const char*>(s), n);
                push(std::move(v));
                break;
            }
            case 'J': case 'K': case 'M': {  // BININT, BININT1, BININT2
                ValuePtr v = make(K::Int);
                v->integer = op == 'J' ? static_cast<int32_t>(le(4)) : static_cast<int64_t>(le(op == 'K' ? 1 : 2));
                push(std::move(v));
                break;
            }
            case 0x8a: {  // LONG1: little-endian two's complement of n bytes
                const size_t n = static_cast<size_t>(le(1));
                if (n > 8) bad("integer wider than 64 bits");
                const uint8_t* b = take(n);
                uint64_t u = 0;
                for (size_t i = 0; i < n; ++i) u |= static_cast<uint64_t>(b[i]) << (8 * i);
                if (n > 0 && n < 8 && (b[n - 1] & 0x80)) u |= ~uint64_t{0} << (8 * n);
                ValuePtr v = make(K::Int);
                v->integer = static_cast<int64_t>(u);
                push(std::move(v));
                break;
            }
            case 'N': push(make(K::None)); break;
            case 0x88: case 0x89: {  // NEWTRUE, NEWFALSE
                ValuePtr v = make(K::Bool);
                v->integer = op == 0x88;
                push(std::move(v));
                break;
            }
            case 't': push(tuple_of(pop_to_mark())); break;  // TUPLE
            case 0x85: case 0x86: case 0x87: {  // TUPLE1..3
                std::vector<ValuePtr> items(static_cast<size_t>(op - 0x84));
                for (size_t i = items.size(); i-- > 0;) items[i] = pop();
                push(tuple_of(std::move(items)));
                break;
            }
            case 'c': {  // GLOBAL
                std::string module = line();
                std::string name = line();
                global(module, name);
                break;
            }
            case 'Q': {  // BINPERSID
                ValuePtr pid = pop();
                push(persistent_load(pid));
                break;
            }
            case 'R': {  // REDUCE
                ValuePtr args = pop();
                ValuePtr callable = pop();
                push(reduce(callable, args));
                break;
            }
            case 's': {  // SETITEM
                ValuePtr value = pop();
                ValuePtr key = pop();
                if (stack_.size() <= mark_floor()) bad("SETITEM without a dict");
                set_item(stack_.back(), std::move(key), std::move(value));
                break;
            }
            case 'u': {  // SETITEMS
                std::vector<ValuePtr> items = pop_to_mark();
                if (items.size() % 2 != 0) bad("SETITEMS with an odd number of items");
                if (stack_.size() <= mark_floor()) bad("SETITEMS without a dict");
                for (size_t i = 0; i < items.size(); i += 2) set_item(stack_.back(), items[i], items[i + 1]);
                break;
            }
            case 'b': {  // BUILD: a state dict's OrderedDict carries its _metadata this way; it is ignored
                ValuePtr state = pop();
                if (stack_.size() <= mark_floor() || stack_.back()->kind != K::Dict ||
                    (state->kind != K::Dict && state->kind != K::None))
                    bad("BUILD on something other than a dict");
                break;
            }
            case 'q': memo_put(le(1)); break;  // BINPUT
            case 'r': memo_put(le(4)); break;  // LONG_BINPUT
            case 'h': memo_get(le(1)); break;  // BINGET
            case 'j': memo_get(le(4)); break;  // LONG_BINGET
            case '.': {  // STOP
                ValuePtr top = pop();
                if (top->kind != K::Dict) bad("the pickle's result is not a dict");
                std::vector<PickledTensor> out;
                out.reserve(top->dict.size());
                for (auto& [key, value] : top->dict) {
                    if (key->kind != K::String) bad("a state dict key is not a string");
                    if (value->kind != K::Tensor) bad(str_cat("state dict entry '", key->text, "' is not a tensor"));
                    PickledTensor t = value->tensor;
                    t.name = key->text;
                    out.push_back(std::move(t));
                }
                return out;
            }
            default:
                bad(str_cat("refusing pickle opcode 0x", "0123456789abcdef"[op >> 4], "0123456789abcdef"[op & 15],
                            op >= 0x20 && op < 0x7f ? str_cat(" ('", static_cast<char>(op), "')") : std::string()));
        }
    }
}

}  // namespace

std::vector<PickledTensor> unpickle_state_dict(const uint8_t* data, size_t size, const std::string& source) {
    return Unpickler(data, size, source).run();
}

}  // namespace duet
