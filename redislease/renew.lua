-- renew.lua: extend KEYS[1] to ARGV[2] ms if token ARGV[1] holds it, or,
-- shared (ARGV[3] is '1'), extend reader ARGV[1] of KEYS[2] (holders
-- KEYS[3]; see readers.lua) if it is live.
-- Returns 1 when renewed, else -1 if a break evicted ARGV[1] (its tombstone
-- in KEYS[4] lives; see break.lua), 0 if not.
local function notheld()
  local _, now = clock()
  return (tonumber(redis.call('ZSCORE', KEYS[4], ARGV[1])) or 0) > now and -1 or 0
end
local cur = redis.call('GET', KEYS[1])
if cur then
  decode(cur)
end
if ARGV[3] ~= '1' then
  if cur and string.sub(cur, 1, #ARGV[1] + 1) == ARGV[1] .. '\0' then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return 1
  end
  return notheld()
end
local _, now = clock()
if not cur or string.byte(cur) ~= 0 or (tonumber(redis.call('ZSCORE', KEYS[2], ARGV[1])) or 0) <= now then
  return notheld()
end
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[1])
reseat(KEYS[1], KEYS[2], KEYS[3], string.match(cur, '^%z(%d+)%z'), now)
return 1
