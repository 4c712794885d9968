-- renew.lua: renew(k, cur, tok, ms, shared) extends lease KEYS[k], whose
-- value is cur, to ms if token tok holds it, or, shared ('1'), extends
-- reader tok of KEYS[k+1] (holders KEYS[k+2]; see readers.lua) if it is
-- live. Returns 1 when renewed, else -1 if a break evicted tok (its
-- tombstone in KEYS[k+3] lives; see break.lua), 0 if not. The script ends
-- with its calls (see store.go): one renewal of KEYS[1..4] and ARGV[1..3],
-- or one per 4 keys and 3 arguments.
local function renew(k, cur, tok, ms, shared)
  if cur then
    decode(cur, KEYS[k])
  end
  if shared ~= '1' and cur and string.byte(cur, #tok + 1) == 0 and string.sub(cur, 1, #tok) == tok then
    redis.call('PEXPIRE', KEYS[k], ms)
    return 1
  end
  local _, now = clock()
  if shared ~= '1' or not cur or string.byte(cur) ~= 0 or (tonumber(redis.call('ZSCORE', KEYS[k + 1], tok)) or 0) <= now then
    return (tonumber(redis.call('ZSCORE', KEYS[k + 3], tok)) or 0) > now and -1 or 0
  end
  redis.call('ZADD', KEYS[k + 1], now + tonumber(ms), tok)
  reseat(KEYS[k], KEYS[k + 1], KEYS[k + 2], string.match(cur, '^%z(%d+)%z'), now)
  return 1
end
